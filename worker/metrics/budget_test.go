package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/metrics"
	"github.com/triage-dev/triage/worker/workertest"
)

// createBatch writes batch id with n records and, when budget is not nil, a
// spend cap.
func createBatch(t *testing.T, db ledger.DBTX, id string, n int, budget *float64) {
	t.Helper()
	require.NoError(t, ledger.CreateBatch(context.Background(), db,
		ledger.Batch{ID: id, Pipeline: "enrich", Key: "main", BudgetUSD: budget}, workertest.Records(n, nil)))
}

// call writes one attempt of key for a record of batch and, unless status is
// intent, finishes it with cost. at pins started_at (zero: now).
func call(t *testing.T, db ledger.DBTX, key, batch, rec string, retry bool, status ledger.AttemptStatus, cost float64, at time.Time) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := ledger.BeginAttempt(ctx, db, ledger.Intent{Batch: batch, RecordID: rec, JobID: 1, Attempt: 1,
		Key: key, Model: "m", IdempotencyKey: batch + "/" + rec, RequestHash: "h", IsRetry: retry, Now: at})
	require.NoError(t, err)
	if status != ledger.AttemptIntent {
		require.NoError(t, ledger.FinishAttempt(ctx, db, id, ledger.Outcome{Status: status, Class: classify.OK, HTTPStatus: 200, CostUSD: cost}))
	}
	return id
}

func ptr(f float64) *float64 { return &f }

func TestBatchBudgetGauges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, metrics.Options{Keys: []string{"main"}})
	db := b.db.Pool

	// capped: running, with a cap and some spend.
	createBatch(t, db, "capped", 3, ptr(1.5))
	call(t, db, "main", "capped", "r001", false, ledger.AttemptOK, 0.25, time.Time{})
	call(t, db, "main", "capped", "r002", false, ledger.AttemptOK, 0.125, time.Time{})
	// plain: no cap, running: no batch series at all.
	createBatch(t, db, "plain", 2, nil)
	call(t, db, "main", "plain", "r001", false, ledger.AttemptOK, 0.5, time.Time{})
	// stopped: capped and paused at its cap.
	createBatch(t, db, "stopped", 2, ptr(0.5))
	call(t, db, "main", "stopped", "r001", false, ledger.AttemptOK, 0.5, time.Time{})
	require.NoError(t, ledger.SetBatchState(ctx, db, "stopped", ledger.BatchPausedBudget))
	// dry: no cap, paused because its key ran out: that key's breaker is
	// open (the state comes from the breaker, as for `triage status`).
	require.NoError(t, ledger.CreateBatch(ctx, db, ledger.Batch{ID: "dry", Pipeline: "enrich", Key: "dry"}, workertest.Records(2, nil)))
	adm, err := b.store.Admit(ctx, "dry", 0)
	require.NoError(t, err)
	_, err = b.store.Trip(ctx, "dry", adm, "credits", time.Hour)
	require.NoError(t, err)
	// done: capped and left paused, but every record settled (one result,
	// one dead letter): settled wins, nothing is reported.
	createBatch(t, db, "done", 2, ptr(3))
	id := call(t, db, "main", "done", "r001", false, ledger.AttemptOK, 0.75, time.Time{})
	require.NoError(t, ledger.StoreResult(ctx, db, "done", "r001", id, []byte(`{"ok":true}`)))
	_, err = ledger.AddDeadLetter(ctx, db, ledger.DeadLetterRow{Batch: "done", RecordID: "r002", JobID: 2,
		Pipeline: "enrich", Key: "main", Class: classify.Rejected, Reason: "invalid_request"})
	require.NoError(t, err)
	require.NoError(t, ledger.SetBatchState(ctx, db, "done", ledger.BatchPausedBudget))
	st, err := ledger.BatchStatus(ctx, db, "done")
	require.NoError(t, err)
	require.Equal(t, ledger.BatchSettled, st.State, "the ledger calls it settled too")

	fams := scrape(t, b.srv.URL)
	require.Equal(t, 1.5, mustValue(t, fams, "triage_batch_budget_usd", L{"batch": "capped"}))
	require.InDelta(t, 0.375, mustValue(t, fams, "triage_batch_spend_usd", L{"batch": "capped"}), 1e-9)
	require.Equal(t, 0.5, mustValue(t, fams, "triage_batch_budget_usd", L{"batch": "stopped"}))
	require.InDelta(t, 0.5, mustValue(t, fams, "triage_batch_spend_usd", L{"batch": "stopped"}), 1e-9)
	require.Len(t, fams["triage_batch_budget_usd"].GetMetric(), 2, "capped and stopped only")
	require.Len(t, fams["triage_batch_spend_usd"].GetMetric(), 2, "capped and stopped only")

	require.Equal(t, 1.0, mustValue(t, fams, "triage_batch_paused", L{"batch": "stopped", "reason": "paused_budget"}))
	require.Equal(t, 1.0, mustValue(t, fams, "triage_batch_paused", L{"batch": "dry", "reason": "paused_exhausted"}))
	require.Len(t, fams["triage_batch_paused"].GetMetric(), 2, "running and settled batches have no series")
	require.Equal(t, 1.0, mustValue(t, fams, "triage_shared_state_up", L{}))
	require.Contains(t, fams["triage_batch_spend_usd"].GetHelp(), "fleet-wide")

	// `triage batch budget` lifts the cap and resumes the batch: its series
	// go; a requeued dead letter makes done unsettled, so its cap and pause
	// are back.
	require.NoError(t, ledger.SetBatchBudget(ctx, db, "stopped", nil))
	dls, err := ledger.ListDeadLetters(ctx, db, ledger.DeadLetterFilter{Batch: "done"})
	require.NoError(t, err)
	require.Len(t, dls, 1)
	_, err = ledger.MarkRequeued(ctx, db, []int64{dls[0].ID})
	require.NoError(t, err)

	fams = scrape(t, b.srv.URL)
	_, ok := value(fams, "triage_batch_budget_usd", L{"batch": "stopped"})
	require.False(t, ok, "no cap, no budget series")
	_, ok = value(fams, "triage_batch_paused", L{"batch": "stopped", "reason": "paused_budget"})
	require.False(t, ok, "running again")
	require.Equal(t, 3.0, mustValue(t, fams, "triage_batch_budget_usd", L{"batch": "done"}))
	require.InDelta(t, 0.75, mustValue(t, fams, "triage_batch_spend_usd", L{"batch": "done"}), 1e-9)
	require.Equal(t, 1.0, mustValue(t, fams, "triage_batch_paused", L{"batch": "done", "reason": "paused_budget"}))
	require.Len(t, fams["triage_batch_budget_usd"].GetMetric(), 2, "capped and done")
}

func TestRetryBudgetGauges(t *testing.T) {
	t.Parallel()
	b := setup(t, metrics.Options{RetryBudgets: map[string]float64{"main": 0.5, "spare": 0.2}})
	db := b.db.Pool
	createBatch(t, db, "b1", 40, nil)
	rec := func(i int) string { return fmt.Sprintf("r%03d", i) }

	// Nothing yet: the floor.
	fams := scrape(t, b.srv.URL)
	for _, k := range []string{"main", "spare"} {
		require.Equal(t, 0.0, mustValue(t, fams, "triage_retry_budget_open", L{"key": k}))
		require.Equal(t, float64(decide.RetryFloorDefault), mustValue(t, fams, "triage_retry_budget_allowed", L{"key": k}))
	}

	// main: 30 first calls in the window, and retries: three open (in
	// flight, failed, possibly billed) and one that succeeded.
	for i := 1; i <= 30; i++ {
		call(t, db, "main", "b1", rec(i), false, ledger.AttemptOK, 0, time.Time{})
	}
	call(t, db, "main", "b1", rec(31), true, ledger.AttemptIntent, 0, time.Time{})
	call(t, db, "main", "b1", rec(32), true, ledger.AttemptFailed, 0, time.Time{})
	call(t, db, "main", "b1", rec(33), true, ledger.AttemptPossiblyBilled, 0, time.Time{})
	call(t, db, "main", "b1", rec(34), true, ledger.AttemptOK, 0, time.Time{})
	// Before the window: neither first calls nor retries count.
	old := time.Now().Add(-decide.RetryWindowDefault - time.Minute)
	for i := 35; i <= 38; i++ {
		call(t, db, "main", "b1", rec(i), i%2 == 0, ledger.AttemptFailed, 0, old)
	}
	// Another key's calls count for it alone, and only listed keys are
	// reported.
	call(t, db, "spare", "b1", rec(39), true, ledger.AttemptFailed, 0, time.Time{})
	call(t, db, "other", "b1", rec(40), true, ledger.AttemptFailed, 0, time.Time{})

	fams = scrape(t, b.srv.URL)
	require.Equal(t, 3.0, mustValue(t, fams, "triage_retry_budget_open", L{"key": "main"}))
	require.Equal(t, 15.0, mustValue(t, fams, "triage_retry_budget_allowed", L{"key": "main"}), "0.5 x 30 first calls, above the floor")
	require.Equal(t, 1.0, mustValue(t, fams, "triage_retry_budget_open", L{"key": "spare"}))
	require.Equal(t, float64(decide.RetryFloorDefault), mustValue(t, fams, "triage_retry_budget_allowed", L{"key": "spare"}))
	require.Len(t, fams["triage_retry_budget_open"].GetMetric(), 2, "keys without a retry budget are not reported")
	require.Len(t, fams["triage_retry_budget_allowed"].GetMetric(), 2)
	require.Contains(t, fams["triage_retry_budget_allowed"].GetHelp(), "fleet-wide")
}

func TestRetryBudgetsAreCopied(t *testing.T) {
	t.Parallel()
	budgets := map[string]float64{"main": 0.5}
	b := setup(t, metrics.Options{RetryBudgets: budgets})
	budgets["late"] = 0.2
	delete(budgets, "main")
	fams := scrape(t, b.srv.URL)
	require.Equal(t, float64(decide.RetryFloorDefault), mustValue(t, fams, "triage_retry_budget_allowed", L{"key": "main"}))
	_, ok := value(fams, "triage_retry_budget_allowed", L{"key": "late"})
	require.False(t, ok, "New copies RetryBudgets")
}
