package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/config"
)

// After a top-up (prepaid_usd raised to the new total bought), the 70 % and
// 90 % alerts fire again the next time spend crosses them.
func TestPrepaidAlertsRearmAfterTopUp(t *testing.T) {
	t.Parallel()
	one := oneCallCost(t, "")
	const n = 20
	before := one * n / 0.95 // batch 1 spends 95 % of it
	b := setup(t, fakeprovider.Scenario{}, tweaks{extraKey: "prepaid_usd = " + ftoa(before) + "\n"})
	b.opts.SpendCheck = 20 * time.Millisecond

	first := b.newRuntime(t)
	require.NoError(t, first.Start(context.Background()))
	b.enqueue(t, "b1", records(n, nil))
	b.waitSettled(t, "b1", 30*time.Second)
	eventually(t, 10*time.Second, "both alerts for the first balance", func() bool {
		return b.hooks.count("prepaid_70") == 1 && b.hooks.count("prepaid_90") == 1
	})
	stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, first.Stop(stop))

	// Top-up: the same again. Spend is now under 50 % of the new total;
	// batch 2 takes it to 95 %.
	after := 2 * before
	text := strings.Replace(b.tomlText, "prepaid_usd = "+ftoa(before), "prepaid_usd = "+ftoa(after), 1)
	require.NotEqual(t, b.tomlText, text)
	cfg, err := config.Parse([]byte(text), "test.toml")
	require.NoError(t, err)
	b.opts.Config = cfg
	b.start(t)
	b.enqueue(t, "b2", records(n, nil))
	b.waitSettled(t, "b2", 30*time.Second)
	eventually(t, 10*time.Second, "both alerts again", func() bool {
		return b.hooks.count("prepaid_70") == 2 && b.hooks.count("prepaid_90") == 2
	})
	// The second 70 % alert is about the new balance, raised when spend
	// crossed 70 % of it, not at the top-up (spend was under 50 % then).
	var spent, prepaid float64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT (fields->>'spent_usd')::float8, (fields->>'prepaid_usd')::float8
		FROM triage_alert WHERE kind = 'prepaid_70' ORDER BY id DESC LIMIT 1`).Scan(&spent, &prepaid))
	require.InDelta(t, after, prepaid, 1e-12)
	require.GreaterOrEqual(t, spent, 0.7*after)
}
