package worker_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/operator"
	"github.com/triage-dev/triage/worker/workertest"
)

// shiftClock is the wall clock moved by an offset a test can change.
type shiftClock struct{ offset atomic.Int64 }

func (c *shiftClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (b *testBundle) cacheRows(t testing.TB) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM triage_response_cache").Scan(&n))
	return n
}

func (b *testBundle) results(t testing.TB, batch string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for row, err := range ledger.Results(context.Background(), b.db.Pool, batch) {
		require.NoError(t, err)
		out[row.ID] = string(row.Output)
	}
	return out
}

func (b *testBundle) enqueueWith(t testing.TB, batch string, recs []ledger.Record, noCache bool) {
	t.Helper()
	require.NoError(t, enqueue.Batch(context.Background(), b.db.Pool, b.db.Schema, b.cfg,
		enqueue.Params{Pipeline: workertest.Pipeline, Batch: batch, Records: recs, NoCache: noCache}))
}

// The same file run twice with cache = true: the second batch makes no call
// and costs $0 (the fake provider, which does not replay a repeated
// Idempotency-Key, counts no new request); its records get the first
// batch's answers, each with a $0 cache_hit attempt in the ledger.
// --no-cache makes the third run call again; once the answers expire the
// watch loop sweeps them and a run calls again.
func TestCacheSecondRunMakesNoCalls(t *testing.T) {
	t.Parallel()
	const n = 8
	tb := setup(t, fakeprovider.Scenario{NoReplay: true}, tweaks{extraPipeline: "cache = true\n"})
	clock := &shiftClock{}
	tb.opts.Clock = clock
	tb.opts.SpendCheck = 20 * time.Millisecond
	tb.start(t)
	recs := records(n, nil)

	tb.enqueue(t, "first", recs)
	st := tb.waitSettled(t, "first", 30*time.Second)
	require.Equal(t, n, st.Completed)
	require.Equal(t, n, tb.fake.Stats().Requests)
	require.Positive(t, st.SpendUSD)
	require.Equal(t, n, tb.cacheRows(t), "one cached answer per distinct request")

	tb.enqueue(t, "second", recs)
	st = tb.waitSettled(t, "second", 30*time.Second)
	require.Equal(t, n, st.Completed)
	require.Zero(t, st.DeadLettered)
	require.Equal(t, n, tb.fake.Stats().Requests, "the second run made no call")
	require.Zero(t, st.SpendUSD)
	require.Zero(t, st.PossiblyBilledUSD)
	require.Equal(t, tb.results(t, "first"), tb.results(t, "second"), "the same answers")
	atts, err := ledger.ListAttempts(context.Background(), tb.db.Pool, ledger.AttemptFilter{Batch: "second"})
	require.NoError(t, err)
	require.Len(t, atts, n)
	for _, a := range atts {
		require.Equal(t, ledger.AttemptOK, a.Status)
		require.Equal(t, "ok", *a.Class)
		require.Equal(t, ledger.ReasonCacheHit, *a.Reason)
		require.Zero(t, a.CostUSD)
		require.Zero(t, a.InputTokens+a.OutputTokens)
	}
	// The idempotency key stays per record and batch.
	first, err := ledger.ListAttempts(context.Background(), tb.db.Pool, ledger.AttemptFilter{Batch: "first"})
	require.NoError(t, err)
	keys := map[string]bool{}
	for _, a := range append(first, atts...) {
		require.False(t, keys[a.IdempotencyKey], "idempotency key %s used twice", a.IdempotencyKey)
		keys[a.IdempotencyKey] = true
	}

	// --no-cache: fresh calls for every record.
	tb.enqueueWith(t, "fresh", recs, true)
	st = tb.waitSettled(t, "fresh", 30*time.Second)
	require.Equal(t, n, st.Completed)
	require.Equal(t, 2*n, tb.fake.Stats().Requests, "--no-cache called for every record")
	require.Positive(t, st.SpendUSD)

	// 31 days on, past the default 30-day TTL: the watch loop sweeps every
	// cached answer, and a run calls again.
	clock.offset.Store(int64(31 * 24 * time.Hour))
	eventually(t, 10*time.Second, "expired answers swept", func() bool { return tb.cacheRows(t) == 0 })
	tb.enqueue(t, "later", recs)
	st = tb.waitSettled(t, "later", 30*time.Second)
	require.Equal(t, n, st.Completed)
	require.Equal(t, 3*n, tb.fake.Stats().Requests, "expired answers are not used")
}

// A pipeline without cache = true never answers from the cache, and stores
// nothing in it.
func TestNoCacheByDefault(t *testing.T) {
	t.Parallel()
	const n = 4
	tb := setup(t, fakeprovider.Scenario{NoReplay: true}, tweaks{})
	tb.start(t)
	tb.enqueue(t, "first", records(n, nil))
	tb.waitSettled(t, "first", 30*time.Second)
	tb.enqueue(t, "second", records(n, nil))
	tb.waitSettled(t, "second", 30*time.Second)
	require.Equal(t, 2*n, tb.fake.Stats().Requests)
	require.Zero(t, tb.cacheRows(t))
}

// Requeueing dead letters answers them from the cache when another batch
// paid for the same request, unless the requeue says NoCache.
func TestCacheRequeue(t *testing.T) {
	t.Parallel()
	tb := setup(t, fakeprovider.Scenario{NoReplay: true}, tweaks{extraPipeline: "cache = true\n"})
	tb.start(t)
	recs := records(2, nil)
	tb.enqueue(t, "paid", recs)
	tb.waitSettled(t, "paid", 30*time.Second)
	require.Equal(t, 2, tb.fake.Stats().Requests)

	// Batch "dead": its records were dead-lettered (here by hand, as a
	// crash or a worker-error dead letter would leave them) with no job
	// left to run.
	require.NoError(t, ledger.CreateBatch(context.Background(), tb.db.Pool,
		ledger.Batch{ID: "dead", Pipeline: workertest.Pipeline, Key: workertest.Key}, recs))
	for _, r := range recs {
		_, err := ledger.AddDeadLetter(context.Background(), tb.db.Pool, ledger.DeadLetterRow{
			Batch: "dead", RecordID: r.ID, JobID: 1, Pipeline: workertest.Pipeline, Key: workertest.Key,
			Class: classify.Transient, Reason: decide.ReasonRetriesExhausted, Request: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	dls := tb.deadLetters(t, "dead")
	require.Len(t, dls, 2)

	res, err := operator.Requeue(context.Background(), tb.db.Pool, tb.cfg, operator.Selection{IDs: []int64{dls[0].ID}}, operator.RequeueOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Requeued)
	eventually(t, 30*time.Second, "requeued record answered", func() bool { return tb.status(t, "dead").Completed == 1 })
	require.Equal(t, 2, tb.fake.Stats().Requests, "requeue answered from the cache")

	res, err = operator.Requeue(context.Background(), tb.db.Pool, tb.cfg, operator.Selection{IDs: []int64{dls[1].ID}}, operator.RequeueOptions{NoCache: true})
	require.NoError(t, err)
	require.Equal(t, 1, res.Requeued)
	st := tb.waitSettled(t, "dead", 30*time.Second)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, 3, tb.fake.Stats().Requests, "requeue --no-cache called")
}
