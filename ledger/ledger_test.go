package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
)

type testBundle struct {
	ctx context.Context
	db  *dbtest.DB
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{ctx: t.Context(), db: dbtest.New(t)}
}

func records(n int) []ledger.Record {
	out := make([]ledger.Record, n)
	for i := range out {
		out[i] = ledger.Record{ID: fmt.Sprintf("r%d", i+1), Line: i + 1, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i+1))}
	}
	return out
}

func (b *testBundle) batch(t *testing.T, id string, n int) {
	t.Helper()
	require.NoError(t, ledger.CreateBatch(b.ctx, b.db.Pool, ledger.Batch{ID: id, Pipeline: "enrich", Key: "main"}, records(n)))
}

func intent(batch, record string, attempt int) ledger.Intent {
	return ledger.Intent{
		Batch: batch, RecordID: record, JobID: 42, Attempt: attempt, Key: "main", Model: "gpt-4o-mini",
		IdempotencyKey: batch + "/" + record, RequestHash: "h1", IsRetry: attempt > 1, EstCostUSD: 0.01,
	}
}

// batchLines writes, for each record of batch b1 under key "k", a
// batch-mode attempt estimated at est (its idempotency key the record's
// custom id, the record's id itself when custom is nil; its job the
// record's place from 1) and its line waiting to be sent, and returns the
// lines' ids in order.
func batchLines(t *testing.T, b *testBundle, est float64, custom func(record string) string, records ...string) []int64 {
	t.Helper()
	ids := make([]int64, len(records))
	for i, rec := range records {
		job, id := int64(i+1), rec
		if custom != nil {
			id = custom(rec)
		}
		att, err := ledger.BeginAttempt(b.ctx, b.db.Pool, ledger.Intent{Batch: "b1", RecordID: rec, JobID: job,
			Attempt: 1, Key: "k", Model: "m", IdempotencyKey: id, RequestHash: "h", EstCostUSD: est, Mode: ledger.ModeBatch})
		require.NoError(t, err)
		ids[i], err = ledger.AddBatchLine(b.ctx, b.db.Pool, ledger.NewBatchLine{Key: "k", Batch: "b1", RecordID: rec,
			JobID: job, CustomID: id, AttemptID: att, Body: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	return ids
}

// providerBatch puts lines in a provider batch of key "k" (anthropic,
// model m) first due a poll at poll.
func providerBatch(t *testing.T, b *testBundle, lines []int64, poll time.Time) ledger.ProviderBatch {
	t.Helper()
	r, err := ledger.CreateProviderBatch(b.ctx, b.db.Pool, ledger.NewProviderBatch{Key: "k", Vendor: "anthropic", Model: "m",
		Lines: lines, NextPollAt: poll})
	require.NoError(t, err)
	return r
}

// costing is record's first attempt in batch b1 estimated at est and
// counted in flight for inFlight after it began (0: the ledger's default).
func costing(record string, est float64, inFlight time.Duration) ledger.Intent {
	i := intent("b1", record, 1)
	i.EstCostUSD, i.InFlightFor = est, inFlight
	return i
}

func TestAttemptLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 2)
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

	in := intent("b1", "r1", 1)
	in.Now = start
	id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, in)
	require.NoError(t, err)

	atts, err := ledger.ListAttempts(b.ctx, b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, atts, 1)
	require.Equal(t, ledger.AttemptIntent, atts[0].Status)
	require.True(t, atts[0].StartedAt.Equal(start))
	require.Nil(t, atts[0].FinishedAt)

	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{
		Status: ledger.AttemptOK, Class: classify.OK, HTTPStatus: 200, InputTokens: 100, OutputTokens: 20,
		CostUSD: 0.0025, Now: start.Add(2 * time.Second),
	}))
	atts, err = ledger.ListAttempts(b.ctx, b.db.Pool, ledger.AttemptFilter{Key: "main"})
	require.NoError(t, err)
	a := atts[0]
	require.Equal(t, ledger.AttemptOK, a.Status)
	require.Equal(t, 200, *a.HTTPStatus)
	require.Nil(t, a.VendorCode)
	require.Equal(t, 100, a.InputTokens)
	require.Equal(t, 20, a.OutputTokens)
	require.InDelta(t, 0.0025, a.CostUSD, 1e-12)
	require.True(t, a.FinishedAt.Equal(start.Add(2*time.Second)))

	batch, err := ledger.GetBatch(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.InDelta(t, 0.0025, batch.SpentUSD, 1e-12, "FinishAttempt adds the cost to the batch")
	require.Equal(t, 2, batch.Total)

	err = ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{Status: ledger.AttemptFailed, CostUSD: 1})
	require.ErrorIs(t, err, ledger.ErrAttemptFinished, "an outcome is written once")
	batch, err = ledger.GetBatch(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.InDelta(t, 0.0025, batch.SpentUSD, 1e-12, "a refused finish bills nothing")

	require.ErrorIs(t, ledger.FinishAttempt(b.ctx, b.db.Pool, 999999, ledger.Outcome{Status: ledger.AttemptOK}), ledger.ErrNotFound)
	require.Error(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{Status: ledger.AttemptIntent}))

	spend, err := ledger.SpendByKey(b.ctx, b.db.Pool, "main", start)
	require.NoError(t, err)
	require.InDelta(t, 0.0025, spend, 1e-12)
	spend, err = ledger.SpendByKey(b.ctx, b.db.Pool, "main", start.Add(time.Second))
	require.NoError(t, err)
	require.Zero(t, spend, "the window starts after the attempt")
}

func TestPriorOutcomeCrashedIntentIsAmbiguous(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 1)
	key := "b1/r1"

	p, err := ledger.PriorOutcome(b.ctx, b.db.Pool, key)
	require.NoError(t, err)
	require.Equal(t, ledger.Prior{}, p, "no attempts yet")

	// Attempt 1: the worker writes its intent and dies mid-call.
	_, err = ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", "r1", 1))
	require.NoError(t, err)

	p, err = ledger.PriorOutcome(b.ctx, b.db.Pool, key)
	require.NoError(t, err)
	require.Equal(t, 1, p.Attempts)
	require.Equal(t, 1, p.Ambiguous, "a crashed intent row is ambiguous")
	require.Zero(t, p.OKAttemptID)
	require.InDelta(t, 0.01, p.PossiblyBilledUSD, 1e-12)

	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.InDelta(t, 0.01, st.PossiblyBilledUSD, 1e-12)

	// Attempt 2 times out after sending: possibly billed.
	id2, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", "r1", 2))
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id2, ledger.Outcome{
		Status: ledger.AttemptPossiblyBilled, Class: classify.Ambiguous, Reason: "timeout_after_send",
	}))
	p, err = ledger.PriorOutcome(b.ctx, b.db.Pool, key)
	require.NoError(t, err)
	require.Equal(t, 2, p.Attempts)
	require.Equal(t, 2, p.Ambiguous)

	// Attempt 3 succeeds with the same key; the result is stored with it.
	id3, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", "r1", 3))
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id3, ledger.Outcome{Status: ledger.AttemptOK, CostUSD: 0.003}))
	require.NoError(t, ledger.StoreResult(b.ctx, b.db.Pool, "b1", "r1", id3, json.RawMessage(`{"x":1}`)))
	n, err := ledger.ResolvePossiblyBilled(b.ctx, b.db.Pool, key)
	require.NoError(t, err)
	require.Equal(t, 2, n)

	p, err = ledger.PriorOutcome(b.ctx, b.db.Pool, key)
	require.NoError(t, err)
	require.Equal(t, ledger.Prior{Attempts: 3, OKAttemptID: id3, ResultStored: true, BilledUSD: 0.003}, p)

	n, err = ledger.ResolvePossiblyBilled(b.ctx, b.db.Pool, key)
	require.NoError(t, err)
	require.Zero(t, n, "resolving is idempotent")

	st, err = ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Zero(t, st.PossiblyBilledUSD, "resolved attempts are no longer possibly billed")
	require.Equal(t, ledger.BatchSettled, st.State)

	// The crashed worker's late outcome cannot rewrite a resolved row.
	atts, err := ledger.ListAttempts(b.ctx, b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	first := atts[len(atts)-1]
	require.Equal(t, ledger.AttemptResolved, first.Status)
	require.ErrorIs(t, ledger.FinishAttempt(b.ctx, b.db.Pool, first.ID, ledger.Outcome{Status: ledger.AttemptOK}), ledger.ErrAttemptFinished)
}

func TestPriorOutcomeOKWithoutResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 1)
	id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", "r1", 1))
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{Status: ledger.AttemptOK}))
	p, err := ledger.PriorOutcome(b.ctx, b.db.Pool, "b1/r1")
	require.NoError(t, err)
	require.Equal(t, id, p.OKAttemptID)
	require.False(t, p.ResultStored, "the ok attempt's completion transaction did not commit")
}

func TestStoreResultIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 3)
	id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", "r2", 1))
	require.NoError(t, err)

	tx, err := b.db.Pool.Begin(b.ctx)
	require.NoError(t, err)
	require.NoError(t, ledger.StoreResult(b.ctx, tx, "b1", "r2", id, json.RawMessage(`{"color":"red"}`)))
	require.NoError(t, tx.Rollback(b.ctx))
	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Zero(t, st.Completed, "a rolled-back completion stores nothing")

	require.NoError(t, ledger.StoreResult(b.ctx, b.db.Pool, "b1", "r2", id, json.RawMessage(`{"color":"red"}`)))
	require.NoError(t, ledger.StoreResult(b.ctx, b.db.Pool, "b1", "r2", id, json.RawMessage(`{"color":"blue"}`)))
	require.NoError(t, ledger.StoreResult(b.ctx, b.db.Pool, "b1", "r3", id, json.RawMessage(`"plain text"`)))

	var rows []ledger.ResultRow
	for r, err := range ledger.Results(b.ctx, b.db.Pool, "b1") {
		require.NoError(t, err)
		rows = append(rows, r)
	}
	require.Len(t, rows, 3)
	require.Equal(t, []string{"r1", "r2", "r3"}, []string{rows[0].ID, rows[1].ID, rows[2].ID})
	require.Nil(t, rows[0].Output)
	require.Zero(t, rows[0].AttemptID)
	require.JSONEq(t, `{"color":"red"}`, string(rows[1].Output), "the first result is kept")
	require.JSONEq(t, `{"n":2}`, string(rows[1].Data))
	require.Equal(t, id, rows[1].AttemptID)
	require.JSONEq(t, `"plain text"`, string(rows[2].Output))

	st, err = ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, 2, st.Completed)
}

func TestResultsEarlyBreak(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 10)
	n := 0
	for _, err := range ledger.Results(b.ctx, b.db.Pool, "b1") {
		require.NoError(t, err)
		n++
		if n == 3 {
			break
		}
	}
	require.Equal(t, 3, n)
	// The connection was released: the pool still works.
	recs, err := ledger.Records(b.ctx, b.db.Pool, "b1", []string{"r10", "r2", "nope"})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, "r2", recs[0].ID)
	require.Equal(t, 10, recs[1].Line)
	all, err := ledger.Records(b.ctx, b.db.Pool, "b1", nil)
	require.NoError(t, err)
	require.Len(t, all, 10)
}

func deadLetterRow(batch, record string) ledger.DeadLetterRow {
	return ledger.DeadLetterRow{
		Batch: batch, RecordID: record, JobID: 7, Pipeline: "enrich", Key: "main",
		Class: classify.Rejected, Reason: "invalid_request", HTTPStatus: 400, VendorCode: "invalid_request_error",
		Attempts: 1, Request: json.RawMessage(`{"model":"gpt-4o-mini"}`),
		ErrorExcerpt: `{"error":{"message":"bad","type":"invalid_request_error"}} Authorization: Bearer sk-proj-abcdefghijklmnop`,
	}
}

// deadLetters adds rows as dead letters, in order, and returns their ids.
func (b *testBundle) deadLetters(t *testing.T, rows ...ledger.DeadLetterRow) []int64 {
	t.Helper()
	ids := make([]int64, len(rows))
	for i, row := range rows {
		var err error
		ids[i], err = ledger.AddDeadLetter(b.ctx, b.db.Pool, row)
		require.NoError(t, err)
	}
	return ids
}

func TestDeadLetterUniqueAndRequeueOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 3)

	id1, err := ledger.AddDeadLetter(b.ctx, b.db.Pool, deadLetterRow("b1", "r1"))
	require.NoError(t, err)
	again, err := ledger.AddDeadLetter(b.ctx, b.db.Pool, deadLetterRow("b1", "r1"))
	require.NoError(t, err)
	require.Equal(t, id1, again, "a record is dead-lettered at most once at a time")

	row := deadLetterRow("b1", "r2")
	row.Class, row.Reason, row.HTTPStatus, row.VendorCode = classify.Transient, "retries_exhausted", 0, ""
	id2, err := ledger.AddDeadLetter(b.ctx, b.db.Pool, row)
	require.NoError(t, err)

	all, err := ledger.ListDeadLetters(b.ctx, b.db.Pool, ledger.DeadLetterFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, all, 2)
	only, err := ledger.ListDeadLetters(b.ctx, b.db.Pool, ledger.DeadLetterFilter{Class: "transient", Reason: "retries_exhausted"})
	require.NoError(t, err)
	require.Len(t, only, 1)
	require.Equal(t, id2, only[0].ID)

	d, err := ledger.GetDeadLetter(b.ctx, b.db.Pool, id1)
	require.NoError(t, err)
	require.NotContains(t, d.ErrorExcerpt, "sk-proj", "the excerpt is redacted")
	require.JSONEq(t, `{"model":"gpt-4o-mini"}`, string(d.Request))
	_, err = ledger.GetDeadLetter(b.ctx, b.db.Pool, 123456)
	require.ErrorIs(t, err, ledger.ErrNotFound)

	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, 2, st.DeadLettered)

	marked, err := ledger.MarkRequeued(b.ctx, b.db.Pool, []int64{id1, id2, 999})
	require.NoError(t, err)
	require.Equal(t, []int64{id1, id2}, marked)
	marked, err = ledger.MarkRequeued(b.ctx, b.db.Pool, []int64{id1, id2})
	require.NoError(t, err)
	require.Empty(t, marked, "a second requeue requeues nothing twice")

	live, err := ledger.ListDeadLetters(b.ctx, b.db.Pool, ledger.DeadLetterFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Empty(t, live)
	hist, err := ledger.ListDeadLetters(b.ctx, b.db.Pool, ledger.DeadLetterFilter{Batch: "b1", IncludeRequeued: true})
	require.NoError(t, err)
	require.Len(t, hist, 2)
	require.NotNil(t, hist[0].RequeuedAt)

	// Requeued, it can fail again and gets a new dead letter.
	id3, err := ledger.AddDeadLetter(b.ctx, b.db.Pool, deadLetterRow("b1", "r1"))
	require.NoError(t, err)
	require.NotEqual(t, id1, id3)
}

func TestMarkRequeuedConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 20)
	var rows []ledger.DeadLetterRow
	for i := 1; i <= 20; i++ {
		rows = append(rows, deadLetterRow("b1", fmt.Sprintf("r%d", i)))
	}
	ids := b.deadLetters(t, rows...)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got []int64
	)
	for range 4 {
		wg.Go(func() {
			m, err := ledger.MarkRequeued(b.ctx, b.db.Pool, ids)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			got = append(got, m...)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.ElementsMatch(t, ids, got, "each dead letter is requeued by exactly one of the racing requeues")
}

func TestAddDeadLetterConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 1)
	const n = 8
	ids := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id, err := ledger.AddDeadLetter(b.ctx, b.db.Pool, deadLetterRow("b1", "r1"))
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		})
	}
	wg.Wait()
	for _, id := range ids {
		require.Equal(t, ids[0], id)
	}
}

func TestDeadLetterJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 2)
	at := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	row := deadLetterRow("b1", "r1")
	row.Now = at
	id, err := ledger.AddDeadLetter(b.ctx, b.db.Pool, row)
	require.NoError(t, err)
	row = deadLetterRow("b1", "r2")
	row.HTTPStatus, row.VendorCode, row.Reason, row.Now = 0, "", "invalid_output", at
	id2, err := ledger.AddDeadLetter(b.ctx, b.db.Pool, row)
	require.NoError(t, err)

	list, err := ledger.ListDeadLetters(b.ctx, b.db.Pool, ledger.DeadLetterFilter{})
	require.NoError(t, err)
	items := make([]ledger.DeadLetterListItem, len(list))
	for i, d := range list {
		items[i] = d.ListItem()
	}
	out, err := json.Marshal(items)
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprintf(`[
		{"id":%d,"batch":"b1","record_id":"r1","class":"rejected","reason":"invalid_request","status":400,
		 "code":"invalid_request_error","attempts":1,"created_at":"2025-03-01T08:00:00Z","suspect":null},
		{"id":%d,"batch":"b1","record_id":"r2","class":"rejected","reason":"invalid_output","status":null,
		 "code":null,"attempts":1,"created_at":"2025-03-01T08:00:00Z","suspect":null}]`, id, id2), string(out))

	full, err := json.Marshal(list[0])
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(full, &m))
	for _, k := range []string{"id", "batch", "record_id", "class", "reason", "status", "code", "attempts", "created_at",
		"job_id", "pipeline", "key", "request", "error_excerpt", "requeued_at"} {
		require.Contains(t, m, k)
	}
	require.Equal(t, map[string]any{"model": "gpt-4o-mini"}, m["request"])
}

func TestBatchStatusCounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	budget := 5.0
	require.NoError(t, ledger.CreateBatch(b.ctx, b.db.Pool,
		ledger.Batch{ID: "b1", Pipeline: "enrich", Key: "main", BudgetUSD: &budget}, records(5)))
	b.batch(t, "b0", 0)

	// r1, r2: ok with results; r3: possibly billed, then dead letter; r4: in flight.
	for _, r := range []string{"r1", "r2"} {
		id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", r, 1))
		require.NoError(t, err)
		require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{Status: ledger.AttemptOK, CostUSD: 0.5}))
		require.NoError(t, ledger.StoreResult(b.ctx, b.db.Pool, "b1", r, id, json.RawMessage(`{}`)))
	}
	id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", "r3", 1))
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{Status: ledger.AttemptPossiblyBilled}))
	_, err = ledger.AddDeadLetter(b.ctx, b.db.Pool, deadLetterRow("b1", "r3"))
	require.NoError(t, err)
	_, err = ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", "r4", 1))
	require.NoError(t, err)

	require.NoError(t, ledger.SetBatchState(b.ctx, b.db.Pool, "b1", ledger.BatchPausedBudget))
	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, ledger.Status{
		Batch: "b1", Pipeline: "enrich", Total: 5, Completed: 2, DeadLettered: 1, Pending: 2, Calls: 4,
		SpendUSD: 1.0, PossiblyBilledUSD: 0.02, State: ledger.BatchPausedBudget, Key: "main",
		Models: map[string]int{"gpt-4o-mini": 2},
	}, st)

	out, err := json.Marshal(st)
	require.NoError(t, err)
	require.JSONEq(t, `{"batch":"b1","pipeline":"enrich","total":5,"completed":2,"dead_lettered":1,"pending":2,
		"calls":4,"spend_usd":1,"possibly_billed_usd":0.02,"state":"paused_budget","cancelled":0,
		"models":{"gpt-4o-mini":2},"fallback":0}`, string(out))

	raised := 10.0
	require.NoError(t, ledger.SetBatchBudget(b.ctx, b.db.Pool, "b1", &raised))
	batch, err := ledger.GetBatch(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, ledger.BatchRunning, batch.State, "raising the budget resumes the batch")
	require.InDelta(t, 10.0, *batch.BudgetUSD, 0)
	require.InDelta(t, 1.0, batch.SpentUSD, 1e-12)

	list, err := ledger.ListBatches(b.ctx, b.db.Pool)
	require.NoError(t, err)
	require.Len(t, list, 2)
	byID := map[string]ledger.Status{list[0].Batch: list[0], list[1].Batch: list[1]}
	require.Equal(t, ledger.BatchSettled, byID["b0"].State, "an empty batch is settled")
	require.Equal(t, ledger.BatchRunning, byID["b1"].State)
	require.Equal(t, "main", byID["b1"].Key, "the batch's key, for its breaker")

	_, err = ledger.BatchStatus(b.ctx, b.db.Pool, "nope")
	require.ErrorIs(t, err, ledger.ErrNotFound)
	require.ErrorIs(t, ledger.SetBatchState(b.ctx, b.db.Pool, "nope", ledger.BatchRunning), ledger.ErrNotFound)
	require.Error(t, ledger.SetBatchState(b.ctx, b.db.Pool, "b1", ledger.BatchSettled), "settled is derived")
	_, err = ledger.GetBatch(b.ctx, b.db.Pool, "nope")
	require.ErrorIs(t, err, ledger.ErrNotFound)

	u, err := ledger.UsageByKey(b.ctx, b.db.Pool, "main", time.Time{})
	require.NoError(t, err)
	require.Equal(t, ledger.KeyUsage{Calls: 4, Retries: 0, SpendUSD: 1.0, PossiblyBilledUSD: 0.02}, u)
}

func TestCreateBatchErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 2)
	err := ledger.CreateBatch(b.ctx, b.db.Pool, ledger.Batch{ID: "b1", Pipeline: "enrich", Key: "main"}, records(1))
	require.ErrorIs(t, err, ledger.ErrBatchExists)

	dup := append(records(3), ledger.Record{ID: "r2", Line: 4, Data: json.RawMessage(`{}`)})
	err = ledger.CreateBatch(b.ctx, b.db.Pool, ledger.Batch{ID: "b2", Pipeline: "enrich", Key: "main"}, dup)
	require.ErrorIs(t, err, ledger.ErrDuplicateRecord)
	_, err = ledger.GetBatch(b.ctx, b.db.Pool, "b2")
	require.ErrorIs(t, err, ledger.ErrNotFound, "a failed CreateBatch leaves nothing behind")

	// In a caller's transaction (as with InsertManyFastTx): a failure inside
	// rolls back to the savepoint and the transaction goes on.
	tx, err := b.db.Pool.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx) //nolint:errcheck
	require.ErrorIs(t, ledger.CreateBatch(b.ctx, tx, ledger.Batch{ID: "b3", Pipeline: "p", Key: "k"}, dup), ledger.ErrDuplicateRecord)
	require.NoError(t, ledger.CreateBatch(b.ctx, tx, ledger.Batch{ID: "b3", Pipeline: "p", Key: "k"}, records(3)))
	require.NoError(t, tx.Commit(b.ctx))
	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b3")
	require.NoError(t, err)
	require.Equal(t, 3, st.Total)
}

func TestCreateBatchLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 100_000
	recs := records(n)
	start := time.Now()
	require.NoError(t, ledger.CreateBatch(b.ctx, b.db.Pool, ledger.Batch{ID: "big", Pipeline: "enrich", Key: "main"}, recs))
	t.Logf("CreateBatch: %d records in %v", n, time.Since(start))
	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "big")
	require.NoError(t, err)
	require.Equal(t, n, st.Total)
	require.Equal(t, n, st.Pending)
	var count int
	require.NoError(t, b.db.Pool.QueryRow(b.ctx, "SELECT count(*) FROM triage_record WHERE batch = 'big'").Scan(&count))
	require.Equal(t, n, count)
}

func BenchmarkCreateBatch(b *testing.B) {
	db := dbtest.New(b)
	recs := records(100_000)
	b.ResetTimer()
	for i := range b.N {
		err := ledger.CreateBatch(b.Context(), db.Pool, ledger.Batch{ID: fmt.Sprintf("b%d", i), Pipeline: "p", Key: "k"}, recs)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func TestBeginAttemptConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 50)
	const workers, per = 10, 20
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ids = map[int64]bool{}
	)
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				rec := fmt.Sprintf("r%d", (w*per+i)%50+1)
				id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", rec, 1))
				if err != nil {
					t.Error(err)
					return
				}
				if err := ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{Status: ledger.AttemptOK, CostUSD: 0.001}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ids[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, ids, workers*per, "every attempt gets its own id")
	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, workers*per, st.Calls)
	require.InDelta(t, 0.2, st.SpendUSD, 1e-9)
	batch, err := ledger.GetBatch(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.InDelta(t, 0.2, batch.SpentUSD, 1e-9, "the batch counter loses no concurrent update")
}

func TestAttemptInCallerTx(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 1)
	err := pgx.BeginFunc(b.ctx, b.db.Pool, func(tx pgx.Tx) error {
		id, err := ledger.BeginAttempt(b.ctx, tx, intent("b1", "r1", 1))
		if err != nil {
			return err
		}
		if err := ledger.FinishAttempt(b.ctx, tx, id, ledger.Outcome{Status: ledger.AttemptOK}); err != nil {
			return err
		}
		return ledger.StoreResult(b.ctx, tx, "b1", "r1", id, json.RawMessage(`{"ok":true}`))
	})
	require.NoError(t, err)
	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, ledger.BatchSettled, st.State)
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		gone     []string
		kept     []string
	}{
		{"openai key in message", `Incorrect API key provided: sk-proj-AbCdEf123456_ghIJ. You can find your API key at https://platform.openai.com`,
			[]string{"sk-proj", "AbCdEf123456"}, []string{"Incorrect API key provided", "platform.openai.com"}},
		{"anthropic key", `key sk-ant-api03-xyzXYZ0123456789-abc is invalid`, []string{"sk-ant", "xyzXYZ"}, []string{"is invalid"}},
		{"bearer header", `Authorization: Bearer abc.def.ghi-123456`, []string{"abc.def"}, []string{"Authorization"}},
		{"bare bearer", `sent with Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig`, []string{"eyJhbG"}, []string{"Bearer"}},
		{"x-api-key header", `x-api-key: secretvalue123`, []string{"secretvalue123"}, []string{"x-api-key"}},
		{"api_key json", `{"api_key": "zzz-top-secret", "model": "m"}`, []string{"zzz-top-secret"}, []string{`"model": "m"`}},
		{"gemini query key", `GET https://generativelanguage.googleapis.com/v1/models?key=AIzaSyA1234567890abcdefghijklmnop&alt=json`,
			[]string{"AIzaSy"}, []string{"alt=json"}},
		{"groq key", `gsk_abcdefghijklmnopqrstuvwxyz0123 rejected`, []string{"gsk_abc"}, []string{"rejected"}},
		{"aws key", `AKIAIOSFODNN7EXAMPLE denied`, []string{"AKIAIOSFODNN7EXAMPLE"}, []string{"denied"}},
		{"no secrets", `{"error":{"message":"risk-free task-force","type":"invalid_request_error"}}`,
			nil, []string{`{"error":{"message":"risk-free task-force","type":"invalid_request_error"}}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := ledger.Redact(tc.in)
			for _, g := range tc.gone {
				require.NotContains(t, got, g)
			}
			for _, k := range tc.kept {
				require.Contains(t, got, k)
			}
		})
	}

	t.Run("truncates on a rune boundary", func(t *testing.T) {
		t.Parallel()
		long := strings.Repeat("é", 400) // 800 bytes
		got := ledger.Redact(long)
		require.LessOrEqual(t, len(got), ledger.ExcerptMaxBytes+len("…"))
		require.True(t, strings.HasSuffix(got, "…"))
		require.True(t, json.Valid([]byte(fmt.Sprintf("%q", got))))
		require.Equal(t, strings.Repeat("é", 250)+"…", got)
	})
	t.Run("redacts before truncating", func(t *testing.T) {
		t.Parallel()
		in := strings.Repeat("x", ledger.ExcerptMaxBytes-10) + " sk-proj-0123456789abcdef"
		require.NotContains(t, ledger.Redact(in), "sk-")
	})
	t.Run("short input unchanged", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "upstream timeout", ledger.Redact("upstream timeout"))
	})
}

func TestUsageByClass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 3)
	b.batch(t, "b2", 1)
	finish := func(batch, record string, attempt int, out ledger.Outcome) {
		t.Helper()
		id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent(batch, record, attempt))
		require.NoError(t, err)
		if out.Status != "" {
			require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id, out))
		}
	}
	// r1: transient, then ok on the retry; r2: ok; r3: possibly billed, then
	// in flight; b2/r1: ok on another key's filter target.
	finish("b1", "r1", 1, ledger.Outcome{Status: ledger.AttemptFailed, Class: classify.Transient, HTTPStatus: 503})
	finish("b1", "r1", 2, ledger.Outcome{Status: ledger.AttemptOK, Class: classify.OK, InputTokens: 100, OutputTokens: 10, CostUSD: 0.25})
	finish("b1", "r2", 1, ledger.Outcome{Status: ledger.AttemptOK, Class: classify.OK, InputTokens: 50, OutputTokens: 5, CostUSD: 0.125})
	finish("b1", "r3", 1, ledger.Outcome{Status: ledger.AttemptPossiblyBilled, Class: classify.Ambiguous})
	finish("b1", "r3", 2, ledger.Outcome{})
	finish("b2", "r1", 1, ledger.Outcome{Status: ledger.AttemptOK, Class: classify.OK, CostUSD: 1})

	total, byClass, err := ledger.UsageByClass(b.ctx, b.db.Pool, ledger.AttemptFilter{Batch: "b1", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, ledger.ClassUsage{Calls: 5, Records: 3, Retries: 2, InputTokens: 150, OutputTokens: 15,
		SpendUSD: 0.375, PossiblyBilledUSD: 0.02}, total, "Limit is ignored; r1 and r3 count once")
	require.Equal(t, []ledger.ClassUsage{
		{Class: "", Calls: 1, Records: 1, Retries: 1, PossiblyBilledUSD: 0.01},
		{Class: "ambiguous", Calls: 1, Records: 1, PossiblyBilledUSD: 0.01},
		{Class: "ok", Calls: 2, Records: 2, Retries: 1, InputTokens: 150, OutputTokens: 15, SpendUSD: 0.375},
		{Class: "transient", Calls: 1, Records: 1},
	}, byClass)

	total, byClass, err = ledger.UsageByClass(b.ctx, b.db.Pool, ledger.AttemptFilter{Key: "main"})
	require.NoError(t, err)
	require.Equal(t, 6, total.Calls)
	require.Equal(t, 4, total.Records, "b1/r1 and b2/r1 are two records")
	require.Len(t, byClass, 4)

	total, byClass, err = ledger.UsageByClass(b.ctx, b.db.Pool, ledger.AttemptFilter{Key: "other"})
	require.NoError(t, err)
	require.Equal(t, ledger.ClassUsage{}, total)
	require.Empty(t, byClass)
}

// A record that has a result is done: a late run (one past its bounds, a
// second job of the same record) cannot also dead-letter it, or the batch
// would count it twice and `dlq requeue` would send a paid record again.
func TestDeadLetterRefusesARecordWithAResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 2)
	id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", "r1", 1))
	require.NoError(t, err)
	require.NoError(t, ledger.StoreResult(b.ctx, b.db.Pool, "b1", "r1", id, json.RawMessage(`{"x":1}`)))

	_, err = ledger.AddDeadLetter(b.ctx, b.db.Pool, deadLetterRow("b1", "r1"))
	require.ErrorIs(t, err, ledger.ErrHasResult)
	dls, err := ledger.ListDeadLetters(b.ctx, b.db.Pool, ledger.DeadLetterFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Empty(t, dls, "a record with a result has no dead letter")

	_, err = ledger.AddDeadLetter(b.ctx, b.db.Pool, deadLetterRow("b1", "r2"))
	require.NoError(t, err, "a record without a result is dead-lettered as before")
	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, 1, st.Completed)
	require.Equal(t, 1, st.DeadLettered)
}

// An intent left by a process that stopped mid-call, then settled by a
// later send under the same idempotency key (resolved: billed once), is not
// in flight: the settled batch's usage has no class-less row, the call is
// summed under ClassResolved.
func TestUsageByClassResolvedIntentIsNotInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 1)
	_, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", "r1", 1))
	require.NoError(t, err)
	id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", "r1", 2))
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{Status: ledger.AttemptOK, Class: classify.OK, CostUSD: 0.25}))
	n, err := ledger.ResolvePossiblyBilled(b.ctx, b.db.Pool, "b1/r1")
	require.NoError(t, err)
	require.Equal(t, 1, n)

	total, byClass, err := ledger.UsageByClass(b.ctx, b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Zero(t, total.PossiblyBilledUSD)
	require.Equal(t, []ledger.ClassUsage{
		{Class: "ok", Calls: 1, Records: 1, Retries: 1, SpendUSD: 0.25},
		{Class: ledger.ClassResolved, Calls: 1, Records: 1},
	}, byClass)
}
