package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/keys"
)

// A job an open breaker refuses parks in the key's paused queue, not until
// the probe's lease (3 min by default) or its probe time runs out: whatever
// closes the breaker, the wake that follows reaches only the snoozes
// already recorded (River records a snooze after the run returns), and a
// job parked for the lease sat out the key's recovery and its own max age
// (nights 30029, 30034, 30075: resumed, or never topped up, one job still
// parked minutes ahead).
func TestJobRefusedDuringAProbeRunsOnceTheKeyCloses(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{}, tweaks{probeInterval: "100ms"})
	// One reconcile at start and none after: the queue is not paused when
	// the breaker opens, so the job is fetched and refused, as a job
	// fetched in the instant before a pause takes effect is.
	b.opts.SupervisorTick = time.Hour
	b.start(t)
	ctx := context.Background()
	// A record worked end to end first: by then the supervisor's one
	// reconcile (started with the runtime, asynchronously) has run, so it
	// cannot pause the queue after the breaker opens below.
	b.enqueue(t, "b0", records(1, nil))
	b.waitSettled(t, "b0", 20*time.Second)
	base := b.fake.Stats().Requests

	// The breaker opens and another job takes its probe claim.
	store := keys.DefaultStore(b.db.Pool)
	adm, err := store.Admit(ctx, "main", 0)
	require.NoError(t, err)
	tripped, err := store.Trip(ctx, "main", adm, "test", 0)
	require.NoError(t, err)
	require.True(t, tripped)
	probe, err := store.Admit(ctx, "main", 1<<40)
	require.NoError(t, err)
	require.True(t, probe.Probe, "the other job holds the probe claim")

	b.enqueue(t, "b1", records(1, nil))
	eventually(t, 20*time.Second, "the job is refused by the breaker", func() bool {
		var parked int
		require.NoError(t, b.db.Pool.QueryRow(ctx,
			`SELECT coalesce(max((metadata->>'triage_parked')::int), 0) FROM river_job`).Scan(&parked))
		return parked > 0
	})
	require.Equal(t, base, b.fake.Stats().Requests, "no call while the breaker is open")

	// The probe succeeds, without the wake its run (or `keys resume`) sends
	// after the close: a snooze River records after that wake never hears
	// it, so the job must not depend on it.
	closed, err := store.ProbeResult(ctx, "main", probe, true, 0)
	require.NoError(t, err)
	require.True(t, closed)
	st := b.waitSettled(t, "b1", 20*time.Second)
	require.Equal(t, 1, st.Completed)
	require.Equal(t, base+1, b.fake.Stats().Requests)
}
