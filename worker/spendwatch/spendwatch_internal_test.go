package spendwatch

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
)

// watchConfig: one key with $1 prepaid.
const watchConfig = `
[[pipelines]]
name = "p"
model = "m"
prompt = "Record: {{json .}}"
output = "text"

[[models]]
name = "m"
key = "main"

[[keys]]
name = "main"
vendor = "openai"
base_url = "http://127.0.0.1:1"
api_key_env = "NONE"
prepaid_usd = 1
`

// One check raises the prepaid threshold spend has crossed, once for the
// fleet: the next check (this process's or another's) finds the claim and
// stays quiet. The passes run on every check with its tick, and a settled
// batch is announced once.
func TestRunOnceAlertsPrepaidOnce(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(watchConfig), "triage.toml")
	require.NoError(t, err)
	db, ctx := dbtest.New(t), context.Background()
	require.NoError(t, ledger.InsertBatch(ctx, db.Pool, ledger.Batch{ID: "b", Pipeline: "p", Key: "main"}))
	id, err := ledger.ReserveAttempt(ctx, db.Pool, ledger.Intent{Batch: "b", RecordID: "r1", JobID: 1, Attempt: 1,
		Key: "main", Model: "m", IdempotencyKey: "i1", RequestHash: "h"})
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(ctx, db.Pool, id, ledger.Outcome{Status: ledger.AttemptFailed, Class: classify.Transient, CostUSD: 0.75}))

	log := slog.New(slog.DiscardHandler)
	alerter, err := keys.NewAlerter(keys.AlerterConfig{Logger: log, Pool: db.Pool})
	require.NoError(t, err)
	var ticks []int
	key, err := cfg.Key("main")
	require.NoError(t, err)
	newWatch := func() *Watch {
		w, err := New(Config{Pool: db.Pool, Config: cfg, Keys: []*config.Key{key}, Alerter: alerter, Every: time.Second, Logger: log,
			Passes: []Pass{func(_ context.Context, tick int) { ticks = append(ticks, tick) }}})
		require.NoError(t, err)
		return w
	}
	newWatch().RunOnce(ctx, 0)
	newWatch().RunOnce(ctx, 1) // another process
	require.NoError(t, alerter.Flush(ctx))

	alerts, err := ledger.AlertsAbout(ctx, db.Pool, "main", "", time.Time{}, time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	var kinds []string
	for _, a := range alerts {
		kinds = append(kinds, a.Kind)
	}
	// The batch has no record left to settle: it is announced too, once.
	require.Equal(t, []string{string(keys.AlertPrepaid70), string(keys.AlertBatchSettled)}, kinds)
	require.Equal(t, []int{0, 1}, ticks)
}

// A top-up (a new prepaid_usd) makes new claims.
func TestPrepaidClaimNamesTheAmount(t *testing.T) {
	t.Parallel()
	require.Equal(t, "prepaid_70@100", prepaidClaim(keys.AlertPrepaid70, 100))
	require.NotEqual(t, prepaidClaim(keys.AlertPrepaid70, 100), prepaidClaim(keys.AlertPrepaid70, 200))
}
