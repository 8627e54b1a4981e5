package worker_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/keys"
)

// A probe dispatched to a job whose batch is at its spend cap parks without
// calling; it must give the claim back, or every other batch on the key
// would wait for the claim's lease.
func TestProbeOnCappedBatchDoesNotBlockTheKey(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{}, tweaks{probeInterval: "200ms"})
	ctx := context.Background()
	zero := 0.0
	// The capped batch's jobs come first, so one of them becomes the probe.
	require.NoError(t, enqueue.Batch(ctx, b.db.Pool, b.db.Schema, b.cfg,
		enqueue.Params{Pipeline: "enrich", Batch: "capped", Records: records(3, nil), BudgetUSD: &zero}))
	b.enqueue(t, "free", records(5, nil))
	store := keys.DefaultStore(b.db.Pool)
	adm, err := store.Admit(ctx, "main", 0)
	require.NoError(t, err)
	tripped, err := store.Trip(ctx, "main", adm, "test", 200*time.Millisecond)
	require.NoError(t, err)
	require.True(t, tripped)

	b.start(t)
	st := b.waitSettled(t, "free", 30*time.Second)
	require.Equal(t, 5, st.Completed)
	require.Equal(t, ledger.BatchPausedBudget, b.status(t, "capped").State)
	require.Zero(t, b.status(t, "capped").Calls, "the capped batch never called")
}

// With retry_budget = 0 (no retries), a throttled record is still re-run
// after its pause: a re-run after a throttle is not a retry.
func TestThrottleWithZeroRetryBudgetStillCompletes(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Script: steps(
		fakeprovider.Step{Action: fakeprovider.ActionRateLimit, RetryAfter: fakeprovider.Duration(300 * time.Millisecond)},
		status(200))}, tweaks{extraKey: "retry_budget = 0\n"})
	b.enqueue(t, "b1", records(1, nil))
	b.start(t)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 1, st.Completed)
	require.Equal(t, 2, b.fake.Stats().Requests)
}

// A job River discarded by itself (here: by hand) is dead-lettered by the
// sweeper, so its record ends where a human looks and the batch settles.
func TestDiscardedJobIsDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{}, tweaks{})
	b.opts.SpendCheck = 50 * time.Millisecond
	b.enqueue(t, "b1", records(3, nil))
	_, err := b.db.Pool.Exec(context.Background(), `UPDATE river_job SET state = 'discarded', finalized_at = now(),
		errors = ARRAY['{"error":"worker: ledger intent: connection reset","attempt":9}'::jsonb]
		WHERE args->>'record_id' = 'r002'`)
	require.NoError(t, err)
	b.start(t)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, 1, st.DeadLettered)
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Equal(t, "discarded", dls[0].Reason)
	require.Contains(t, dls[0].ErrorExcerpt, "connection reset")
	require.Zero(t, b.fake.Stats().ByRecord["r002"].Requests)
}

// A job whose record already has a live dead letter (its earlier run wrote
// it, then died before the cancel landed) cancels without calling.
func TestJobOfDeadLetteredRecordDoesNotCall(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{}, tweaks{})
	b.enqueue(t, "b1", records(2, nil))
	_, err := ledger.AddDeadLetter(context.Background(), b.db.Pool, ledger.DeadLetterRow{
		Batch: "b1", RecordID: "r001", Pipeline: "enrich", Key: "main", Class: classify.OK, Reason: "invalid_output", Attempts: 1})
	require.NoError(t, err)
	b.start(t)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 1, st.Completed)
	require.Equal(t, 1, st.DeadLettered)
	require.Zero(t, b.fake.Stats().ByRecord["r001"].Requests, "a dead-lettered record is never called again")
	eventually(t, 10*time.Second, "the job is cancelled", func() bool { return b.jobStates(t)["cancelled"] == 1 })
}

// An endpoint that echoes the API key in an error body: the dead letter's
// excerpt never holds it, whatever its shape.
func TestDeadLetterExcerptNeverHoldsTheAPIKey(t *testing.T) {
	t.Parallel()
	const key = "PlainSecretValue12345XYZ"
	b := setup(t, fakeprovider.Scenario{}, tweaks{})
	cfg, _ := b.otherEndpoint(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"token=%s is not allowed here","type":"invalid_request_error","param":null,"code":"token_echo"}}`, key)
	}))
	b.opts.Getenv = func(string) string { return key }
	b.enqueue(t, "b1", records(1, nil))
	b.startWith(t, cfg, "echo")
	b.waitSettled(t, "b1", 30*time.Second)
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Contains(t, dls[0].ErrorExcerpt, "is not allowed here")
	require.NotContains(t, dls[0].ErrorExcerpt, key)
	require.NotContains(t, string(dls[0].Request), key)
}
