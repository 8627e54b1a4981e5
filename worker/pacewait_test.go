package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/keys"
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
	// One call every 4 s: the job's wait is well inside its bound (three
	// quarters of the job margin), long enough to trip the key during it.
	b.opts.Pacing = keys.PacerConfig{InitialRate: 0.25}
	rt := b.newRuntime(t)
	// The test takes the pacer's one free slot, so the job waits its turn.
	require.NoError(t, rt.PacerOf(workertest.Key).Wait(ctx, 1, 0))
	b.enqueue(t, "b1", records(1, nil))
	b.run(t, rt)
	eventually(t, 20*time.Second, "the job waits for its pace", func() bool {
		st, _ := rt.Pacing(workertest.Key)
		return st.Binding && b.jobStates(t)["running"] == 1
	})

	store := keys.NewStore(b.db.Pool, keys.StoreConfig{})
	adm, err := store.Admit(ctx, workertest.Key, 0)
	require.NoError(t, err)
	tripped, err := store.Trip(ctx, workertest.Key, adm, "another process saw it exhausted", time.Hour)
	require.NoError(t, err)
	require.True(t, tripped)

	eventually(t, 20*time.Second, "the job parks", func() bool { return b.jobStates(t)["running"] == 0 })
	require.Zero(t, b.fake.Stats().Requests, "no call after the trip")
	require.Zero(t, b.status(t, "b1").Calls)
}
