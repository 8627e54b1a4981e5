package stormwatch

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/service/servicetest"
	"github.com/triage-dev/triage/worker/testclock"
)

// A storm open shorter than the key's storm_alert_after pages nobody;
// past it, one check raises storm_open, and the checks after it (this
// process's or another's) stay quiet for the same storm. The passes run on
// every check.
func TestRunOnceAlertsAStormOnce(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.New(t), context.Background()
	start := time.Now().UTC()
	clock := testclock.New(start)
	store, err := keys.NewStore(db.Pool, keys.StoreConfig{Clock: clock})
	require.NoError(t, err)
	gate, err := store.NewGate(keys.GateConfig{Key: "main", ProbeInterval: time.Minute, Storm: keys.StormSettings{Failures: 1}})
	require.NoError(t, err)
	adm, _, done, err := gate.Admit(ctx, 0)
	require.NoError(t, err)
	require.True(t, adm.Allowed)
	rep, err := done(ctx, keys.OutcomeFailure, "")
	require.NoError(t, err)
	require.True(t, rep.Storm.Opened, "one failure trips this key's storm breaker")

	log := slog.New(slog.DiscardHandler)
	alerter, err := keys.NewAlerter(keys.AlerterConfig{Logger: log, Pool: db.Pool})
	require.NoError(t, err)
	key := &config.Key{Name: "main", StormAlertAfter: 2 * time.Minute}
	passes := 0
	newWatch := func() *Watch {
		w, err := New(Config{Pool: db.Pool, Keys: []*config.Key{key}, Status: store, Alerter: alerter, Every: time.Second,
			Logger: log, Passes: []Pass{func(context.Context) { passes++ }}})
		require.NoError(t, err)
		return w
	}
	alerts := func() []string {
		t.Helper()
		require.NoError(t, alerter.Flush(ctx))
		rows, err := ledger.AlertsAbout(ctx, db.Pool, "main", "", time.Time{}, start.Add(time.Hour), 0)
		require.NoError(t, err)
		var kinds []string
		for _, a := range rows {
			kinds = append(kinds, a.Kind)
		}
		return kinds
	}

	clock.Set(start.Add(time.Minute))
	require.Empty(t, newWatch().RunOnce(ctx).Alerted, "open for a minute, under storm_alert_after")
	require.Empty(t, alerts())

	clock.Set(start.Add(3 * time.Minute))
	require.Equal(t, []string{"main"}, newWatch().RunOnce(ctx).Alerted)
	require.Equal(t, []string{"main"}, newWatch().RunOnce(ctx).Alerted, "another process sees the same storm")
	require.Equal(t, []string{string(keys.AlertStormOpen)}, alerts(), "one alert for the storm")
	require.Equal(t, 3, passes)
}

func TestAlertAfter(t *testing.T) {
	t.Parallel()
	require.Equal(t, AlertAfterDefault, AlertAfter(&config.Key{}))
	require.Equal(t, time.Minute, AlertAfter(&config.Key{StormAlertAfter: time.Minute}))
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{Pool: &pgxpool.Pool{}, Status: &keys.Store{}, Alerter: &keys.Alerter{}, Every: time.Second}
	servicetest.RequiredFields(t, ok, New, "Pool", "Status", "Alerter")
	servicetest.RefusesNonPositive(t, New, ok, "Every")
	cfg := ok
	cfg.Keys = []*config.Key{{Name: "a"}, nil}
	servicetest.Refused(t, New, cfg, "Config.Keys[1] is nil")
	ok.Passes = []Pass{func(context.Context) {}, nil}
	servicetest.Refused(t, New, ok, "Config.Passes[1] is nil")
}
