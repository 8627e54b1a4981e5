package submitter

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/batchapi"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/testclock"
)

// A submitter round with no line ripe to send leaves the exhausted
// breaker's probe to the key's jobs. The lines left of a batch-mode key
// can all be answered, their jobs waiting in the key's held queue to apply
// them: if every round claimed the due probe, formed nothing and gave it
// back a second ahead, the supervisor would never find the probe due and
// those jobs would never run (nights 60308, 70021, 80161 of the night
// simulator did not settle this way).
func TestRoundWithNothingToSendLeavesTheProbeToTheJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	clock := testclock.New(time.Now())
	store, err := keys.NewStore(db.Pool, keys.StoreConfig{Clock: clock, RiverSchema: db.Schema})
	require.NoError(t, err)
	const probeInterval = 300 * time.Millisecond
	gate, err := store.NewGate(keys.GateConfig{Key: "k", ProbeInterval: probeInterval})
	require.NoError(t, err)
	_, err = store.Trip(ctx, "k", keys.Admission{}, "credits", probeInterval)
	require.NoError(t, err)
	clock.Advance(probeInterval)

	s := &Submitter{
		cfg: Config{Pool: db.Pool, RiverSchema: db.Schema, Clock: clock, Store: store, Gate: gate,
			Key: &config.Key{Name: "k", Vendor: "openai"}},
		t: Tuning{}.WithDefaults(), key: "k", log: slog.New(slog.DiscardHandler),
		limit: batchapi.Limits{MaxLines: 100, MaxBytes: 1 << 20},
	}
	for range 3 {
		require.NoError(t, s.formAll(ctx))
	}

	adm, err := store.Admit(ctx, "k", 42)
	require.NoError(t, err)
	require.True(t, adm.Allowed, "the probe is still due for a job: %+v", adm)
	require.True(t, adm.Probe)
}
