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

// Fault 4: a job dispatched as the probe that is dead-lettered by the checks
// that run before admission (here: its runs already used up by worker
// errors) gives the probe claim back at once, so the next job probes and the
// key resumes, instead of the key staying half-open for the claim's lease
// (minutes).
func TestDeadLetteredProbeReleasesItsClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, fakeprovider.Scenario{}, tweaks{probeInterval: "200ms"})
	b.enqueue(t, "b1", records(4, nil))
	// The first job, which the Supervisor will dispatch as the probe, has
	// had its runs used up by the worker's own errors.
	_, err := b.db.Pool.Exec(ctx, `UPDATE river_job SET attempt = 7, max_attempts = 20 WHERE id = (SELECT min(id) FROM river_job)`)
	require.NoError(t, err)
	store := keys.DefaultStore(b.db.Pool)
	adm, err := store.Admit(ctx, workertest.Key, 0)
	require.NoError(t, err)
	tripped, err := store.Trip(ctx, workertest.Key, adm, "test", 200*time.Millisecond)
	require.NoError(t, err)
	require.True(t, tripped)

	b.start(t)
	st := b.waitSettled(t, "b1", 20*time.Second)
	require.Equal(t, 3, st.Completed)
	require.Equal(t, 1, st.DeadLettered)
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Equal(t, "worker_errors", dls[0].Reason)
	require.Equal(t, 3, b.fake.Stats().Requests, "the dead-lettered job never called")
}

// Fault 7: jobs that waited for a concurrency slot while the key was tripped
// (by another process) do not call once they get the slot.
func TestNoCallAfterTripWhileWaitingForASlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, fakeprovider.Scenario{}, tweaks{concurrency: 2, probeInterval: "1h"})
	rt := b.newRuntime(t)
	// The test holds both slots, so the jobs River fetches wait in the
	// limiter, past their admission.
	lim := rt.Limiter(workertest.Key)
	var held []func()
	for range 2 {
		release, err := lim.Acquire(ctx)
		require.NoError(t, err)
		held = append(held, release)
	}
	b.enqueue(t, "b1", records(2, nil))
	b.run(t, rt)
	eventually(t, 20*time.Second, "both jobs wait for a slot", func() bool { return lim.Waiting() == 2 })

	store := keys.DefaultStore(b.db.Pool)
	adm, err := store.Admit(ctx, workertest.Key, 0)
	require.NoError(t, err)
	tripped, err := store.Trip(ctx, workertest.Key, adm, "another process saw it exhausted", time.Hour)
	require.NoError(t, err)
	require.True(t, tripped)
	for _, release := range held {
		release()
	}
	eventually(t, 20*time.Second, "both jobs park", func() bool { return b.jobStates(t)["running"] == 0 })
	require.Zero(t, b.fake.Stats().Requests, "no call after the trip")
	require.Zero(t, b.status(t, "b1").Calls)
}

// Fault 8: runs that ended in the worker's own errors (simulated: River's
// attempt counter already at 3 when the job first calls) spend none of
// max_attempts: the record still gets its six calls and completes on the
// fifth.
func TestWorkerErrorsDoNotSpendAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, fakeprovider.Scenario{Script: steps(status(503), status(503), status(503), status(503), status(200))}, tweaks{})
	b.enqueue(t, "b1", records(1, nil))
	_, err := b.db.Pool.Exec(ctx, `UPDATE river_job SET attempt = 3`)
	require.NoError(t, err)
	b.start(t)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 1, st.Completed, "dead letters: %+v", b.deadLetters(t, "b1"))
	require.Equal(t, 5, b.fake.Stats().Requests)
}

// Fault 9: a transient error's retry-after is capped at the backoff cap
// (5 min by default; the tests' 100 ms): a 503 asking for a day does not
// park the record for a day.
func TestTransientRetryAfterIsCapped(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Script: steps(
		fakeprovider.Step{Action: fakeprovider.ActionOverloaded, Status: 503, RetryAfter: fakeprovider.Duration(24 * time.Hour)},
		status(200))}, tweaks{})
	b.enqueue(t, "b1", records(1, nil))
	b.start(t)
	st := b.waitSettled(t, "b1", 20*time.Second)
	require.Equal(t, 1, st.Completed)
	require.Equal(t, 2, b.fake.Stats().Requests)
}

// Fault 5: the dead letter and the call's outcome land together. When the
// dead-letter write fails once (a database error), the worker does not hand
// the job back to River with the outcome recorded and no dead letter (the
// next run would resend the rejected request unchanged): it writes both
// again, and the provider sees one request.
func TestRejectedIsNotResentWhenTheDeadLetterWriteFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, tweaks{})
	// The first dead-letter insert fails, as a database error would.
	_, err := b.db.Pool.Exec(ctx, `
CREATE SEQUENCE fail_once; -- nextval survives the rollback
CREATE FUNCTION fail_first_dead_letter() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF nextval('fail_once') = 1 THEN
    RAISE EXCEPTION 'injected failure';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fail_first_dead_letter BEFORE INSERT ON triage_dead_letter
  FOR EACH ROW EXECUTE FUNCTION fail_first_dead_letter();`)
	require.NoError(t, err)
	b.enqueue(t, "b1", records(1, func(int) string { return `,"note":"POISON"` }))
	b.start(t)
	st := b.waitSettled(t, "b1", 20*time.Second)
	require.Equal(t, 1, st.DeadLettered)
	require.Equal(t, 1, b.fake.Stats().Requests, "a rejected request is never resent")
}
