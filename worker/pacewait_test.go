package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/provider"
	"github.com/triage-dev/triage/worker/workertest"
)

// Issue 19, fault 5: a job that waits for its pace while the key's breaker
// opens (another process saw the key exhausted) asks for admission again
// after the wait, and does not call: no request reaches the provider once
// the breaker is open.
func TestNoCallAfterTripDuringAPacingWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, fakeprovider.Scenario{}, tweaks{probeInterval: "1h"})
	// One call every 12 s: the job's wait is inside its bound (three
	// quarters of the job margin), and far longer than the trip below
	// takes, even on a loaded machine.
	b.opts.Pacing = keys.PacerConfig{InitialRate: 1.0 / 12}
	tr := &roundTrips{}
	rt := b.tracedRuntime(t, tr)
	pacer := rt.PacerOf(workertest.Key)
	// The test takes the pacer's one free slot, so the job waits its turn.
	require.NoError(t, pacer.Wait(ctx, 1, 0))
	b.enqueue(t, "b1", records(1, nil))
	b.run(t, rt)
	// The pace binds as soon as the job finds it cannot go at once, before
	// its admission; the job waits once its admission is answered (the
	// run's first batch).
	eventually(t, 20*time.Second, "the job waits for its pace", func() bool {
		st, _ := rt.Pacing(workertest.Key)
		return st.Binding && b.jobStates(t)["running"] == 1 && tr.batchesEnded() >= 1
	})

	store := keys.DefaultStore(b.db.Pool)
	adm, err := store.Admit(ctx, workertest.Key, 0)
	require.NoError(t, err)
	tripped, err := store.Trip(ctx, workertest.Key, adm, "another process saw it exhausted", time.Hour)
	require.NoError(t, err)
	require.True(t, tripped)
	// Only now does the pace let the job go: the provider's headers name
	// a high limit (the job looks again every 50 ms while the limit is
	// unknown).
	now := time.Now()
	pacer.Observe(keys.PaceOutcome{At: now, Answered: true, OK: true, RateLimit: provider.ParseRateLimit("openai",
		map[string]string{"x-ratelimit-limit-requests": "60000", "x-ratelimit-remaining-requests": "59999"}, now)})

	eventually(t, 20*time.Second, "the job parks", func() bool { return b.jobStates(t)["running"] == 0 })
	require.Zero(t, b.fake.Stats().Requests, "no call after the trip")
	require.Zero(t, b.status(t, "b1").Calls)
}
