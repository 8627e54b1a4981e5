package ledger_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/workertest"
)

// A batch's status lists the provider batches in flight that hold its
// lines, with the vendor's status and counts, its age and expiry; a
// collected or abandoned one is not in flight.
func TestBatchStatusProviderBatchesInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 4)
	b.batch(t, "b2", 2)
	b.batch(t, "b3", 1)
	// One OpenAI batch shared by b1 and b2, one Anthropic batch of b1's,
	// and a collected one of b1's that is over.
	shared := workertest.InsertProviderBatch(t, b.db.Pool, workertest.ProviderBatch{Key: "main", Batch: "b1",
		Records: []string{"r1", "r2"}, Lines: 4, ProviderBatchID: "batch_abc", VendorStatus: "in_progress",
		Counts: `{"total":4,"completed":1,"failed":0}`, SubmittedAgo: 90 * time.Minute, ExpiresIn: 22*time.Hour + 30*time.Minute})
	_, err := b.db.Pool.Exec(b.ctx, `INSERT INTO triage_provider_batch_line (provider_batch, key, job_id, batch, record_id, custom_id, body)
		VALUES ($1, 'main', 7001, 'b2', 'r1', 'c-b2-r1', '{}'), ($1, 'main', 7002, 'b2', 'r2', 'c-b2-r2', '{}')`, shared)
	require.NoError(t, err)
	workertest.InsertProviderBatch(t, b.db.Pool, workertest.ProviderBatch{Key: "main", Vendor: "anthropic", Batch: "b1",
		Records: []string{"r3"}, State: "intent", SubmittedAgo: time.Minute})
	workertest.InsertProviderBatch(t, b.db.Pool, workertest.ProviderBatch{Key: "main", Batch: "b1",
		Records: []string{"r4"}, State: "collected", ProviderBatchID: "batch_old", SubmittedAgo: 5 * time.Hour})

	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Len(t, st.ProviderBatches, 2, "the collected one is over")
	p := st.ProviderBatches[0]
	require.Equal(t, shared, p.ID)
	require.Equal(t, "openai", p.Vendor)
	require.Equal(t, "submitted", p.State)
	require.Equal(t, "batch_abc", *p.ProviderBatchID)
	require.Equal(t, "in_progress", *p.VendorStatus)
	require.JSONEq(t, `{"total":4,"completed":1,"failed":0}`, string(p.Counts))
	require.Equal(t, 4, p.Lines)
	require.Equal(t, 2, p.BatchLines, "two of its four lines are b1's")
	require.InDelta(t, 90*60, p.AgeS, 60)
	require.NotNil(t, p.ExpiresInS)
	require.InDelta(t, (22*60+30)*60, *p.ExpiresInS, 60)
	q := st.ProviderBatches[1]
	require.Equal(t, "anthropic", q.Vendor)
	require.Equal(t, "intent", q.State)
	require.Nil(t, q.ProviderBatchID, "not at the provider yet")
	require.Nil(t, q.ExpiresInS)
	require.JSONEq(t, `{}`, string(q.Counts))
	require.Nil(t, p.LastError, "no step failed")

	// A failed poll is said, until a step succeeds.
	_, err = b.db.Pool.Exec(b.ctx, `UPDATE triage_provider_batch SET last_error = 'batchapi: get: status 404 (invalid_request_error)' WHERE id = $1`, shared)
	require.NoError(t, err)
	st, err = ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.NotNil(t, st.ProviderBatches[0].LastError)
	require.Equal(t, "batchapi: get: status 404 (invalid_request_error)", *st.ProviderBatches[0].LastError)

	list, err := ledger.ListBatches(b.ctx, b.db.Pool)
	require.NoError(t, err)
	require.Len(t, list, 3)
	require.Equal(t, st.ProviderBatches[0].ID, list[0].ProviderBatches[0].ID)
	require.Len(t, list[1].ProviderBatches, 1)
	require.Equal(t, 2, list[1].ProviderBatches[0].BatchLines)
	require.Nil(t, list[2].ProviderBatches, "b3 has none")

	// A batch with none has no "provider_batches" at all.
	st3, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b3")
	require.NoError(t, err)
	out, err := json.Marshal(st3)
	require.NoError(t, err)
	require.NotContains(t, string(out), "provider_batches")
	require.NotContains(t, string(out), `"by_mode"`)
	require.NotContains(t, string(out), "deadline")
}

// Lines written but in no provider batch yet are counted, so a batch that
// waits for the submitter to gather its lines says so; a batch with none
// has no "batch_lines_unsent".
func TestBatchStatusLinesUnsent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 4)
	b.batch(t, "b2", 1)
	workertest.InsertProviderBatch(t, b.db.Pool, workertest.ProviderBatch{Key: "main", Batch: "b1",
		Records: []string{"r1"}, ProviderBatchID: "batch_abc"})
	_, err := b.db.Pool.Exec(b.ctx, `INSERT INTO triage_provider_batch_line (key, job_id, batch, record_id, custom_id, body, state)
		VALUES ('main', 8001, 'b1', 'r2', 'c-b1-r2', '{}', 'pending'), ('main', 8002, 'b1', 'r3', 'c-b1-r3', '{}', 'pending'),
		       ('main', 8003, 'b1', 'r4', 'c-b1-r4', '{}', 'applied')`)
	require.NoError(t, err)

	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, 2, st.BatchLinesUnsent, "the submitted and the applied lines are not waiting to be sent")
	list, err := ledger.ListBatches(b.ctx, b.db.Pool)
	require.NoError(t, err)
	require.Equal(t, 2, list[0].BatchLinesUnsent)
	require.Zero(t, list[1].BatchLinesUnsent)

	st2, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b2")
	require.NoError(t, err)
	out, err := json.Marshal(st2)
	require.NoError(t, err)
	require.NotContains(t, string(out), "batch_lines_unsent")
}

// A cancel request marks every provider batch in flight holding the
// batch's lines, and only those; asking twice says it was asked before.
func TestRequestProviderCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 4)
	b.batch(t, "b2", 1)
	first := workertest.InsertProviderBatch(t, b.db.Pool, workertest.ProviderBatch{Key: "main", Batch: "b1",
		Records: []string{"r1"}, ProviderBatchID: "batch_abc", SubmittedAgo: time.Hour})
	second := workertest.InsertProviderBatch(t, b.db.Pool, workertest.ProviderBatch{Key: "main", Vendor: "anthropic", Batch: "b1",
		Records: []string{"r2"}, ProviderBatchID: "msgbatch_xyz", SubmittedAgo: time.Minute})
	done := workertest.InsertProviderBatch(t, b.db.Pool, workertest.ProviderBatch{Key: "main", Batch: "b1",
		Records: []string{"r3"}, State: "collected", ProviderBatchID: "batch_old"})
	other := workertest.InsertProviderBatch(t, b.db.Pool, workertest.ProviderBatch{Key: "main", Batch: "b2",
		Records: []string{"r1"}, ProviderBatchID: "batch_other"})

	// Each polled a moment ago, the next poll backed off to minutes away.
	_, err := b.db.Pool.Exec(b.ctx, `UPDATE triage_provider_batch SET next_poll_at = now() + interval '10 minutes'`)
	require.NoError(t, err)

	got, err := ledger.RequestProviderCancel(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, first, got[0].ID, "oldest first")
	require.Equal(t, "batch_abc", *got[0].ProviderBatchID)
	require.Equal(t, second, got[1].ID)
	require.Equal(t, "msgbatch_xyz", *got[1].ProviderBatchID)
	require.False(t, got[0].Already)

	requested := func(id int64) bool {
		var v bool
		require.NoError(t, b.db.Pool.QueryRow(b.ctx, `SELECT cancel_requested FROM triage_provider_batch WHERE id = $1`, id).Scan(&v))
		return v
	}
	require.True(t, requested(first))
	require.True(t, requested(second))
	require.False(t, requested(done), "a collected batch is over")
	require.False(t, requested(other), "another batch's")
	// The cancel is sent on the submitter's next poll: a submitted batch
	// is due at once, not after its poll backoff.
	due := func(id int64) bool {
		var v bool
		require.NoError(t, b.db.Pool.QueryRow(b.ctx, `SELECT next_poll_at <= now() FROM triage_provider_batch WHERE id = $1`, id).Scan(&v))
		return v
	}
	require.True(t, due(first))
	require.True(t, due(second))
	require.False(t, due(other), "another batch's poll is not moved")

	again, err := ledger.RequestProviderCancel(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Len(t, again, 2)
	require.True(t, again[0].Already)

	none, err := ledger.RequestProviderCancel(b.ctx, b.db.Pool, "nope")
	require.NoError(t, err)
	require.Empty(t, none)
	require.NotNil(t, none)
}

// Spend is split by mode, with what the batch lines saved against sync;
// a ledger without batch lines shows no split at all.
func TestSpendByMode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 4)
	b.batch(t, "b2", 1)
	id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", "r1", 1))
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{Status: ledger.AttemptOK, CostUSD: 0.02}))
	id, err = ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b2", "r1", 1))
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{Status: ledger.AttemptOK, CostUSD: 0.5}))

	byMode, saved, err := ledger.UsageByMode(b.ctx, b.db.Pool, ledger.AttemptFilter{})
	require.NoError(t, err)
	require.Nil(t, byMode, "sync only: nothing new")
	require.Nil(t, saved)
	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Nil(t, st.ByMode)
	require.Nil(t, st.BatchSavedUSD)

	workertest.BatchAttempt(t, b.db.Pool, "b1", "r2", 0.01, 0.02)
	workertest.BatchAttempt(t, b.db.Pool, "b1", "r3", 0.03, 0.06)

	batch := 0.08
	want := []ledger.ModeUsage{{Mode: "sync", Calls: 1, SpendUSD: 0.02}, {Mode: "batch", Calls: 2, SpendUSD: 0.04, SyncCostUSD: &batch}}
	byMode, saved, err = ledger.UsageByMode(b.ctx, b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Equal(t, want, byMode)
	require.Equal(t, 0.04, *saved)
	st, err = ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, want, st.ByMode)
	require.Equal(t, 0.04, *st.BatchSavedUSD)
	require.InDelta(t, 0.06, st.SpendUSD, 1e-12, "spend_usd is still the whole")

	all, saved, err := ledger.UsageByMode(b.ctx, b.db.Pool, ledger.AttemptFilter{})
	require.NoError(t, err)
	require.Equal(t, 2, all[0].Calls, "b2's sync call too")
	require.Equal(t, 0.52, all[0].SpendUSD)
	require.Equal(t, 0.04, *saved)
	st2, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b2")
	require.NoError(t, err)
	require.Nil(t, st2.ByMode, "b2 has no batch lines")
}

// A batch's deadline is stored with it, all or nothing, and read back by
// GetBatch and BatchStatus; a batch without one has none.
func TestBatchDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	at := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	require.NoError(t, ledger.CreateBatch(b.ctx, b.db.Pool, ledger.Batch{ID: "b1", Pipeline: "enrich", Key: "main", Deadline: &at}, records(2)))
	got, err := ledger.GetBatch(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.True(t, at.Equal(*got.Deadline))
	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.True(t, at.Equal(*st.Deadline))

	// Two records with one id: neither the batch nor its deadline is written.
	dup := append(records(1), records(1)...)
	require.ErrorIs(t, ledger.CreateBatch(b.ctx, b.db.Pool, ledger.Batch{ID: "b2", Pipeline: "enrich", Key: "main", Deadline: &at}, dup),
		ledger.ErrDuplicateRecord)
	_, err = ledger.GetBatch(b.ctx, b.db.Pool, "b2")
	require.ErrorIs(t, err, ledger.ErrNotFound)

	b.batch(t, "b3", 1)
	got, err = ledger.GetBatch(b.ctx, b.db.Pool, "b3")
	require.NoError(t, err)
	require.Nil(t, got.Deadline)
}
