package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
)

// Sends that settled without a known cost (possibly billed, or an intent
// whose run died) never settle further. They count as spent at their
// estimate, so a capped batch reaches paused_budget instead of waiting
// forever for room they will never give back.
func TestReserveAttemptCountsStuckEstimatesAsSpent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	budgeted(t, b, "b1", 1.0, 10)
	in := func(rec string) ledger.Intent { return costing(rec, 0.3, 2*time.Minute) }
	// r1 went out and got no answer; r2 was billed 0.3.
	id1, err := ledger.ReserveAttempt(b.ctx, b.db.Pool, in("r1"))
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id1, ledger.Outcome{Status: ledger.AttemptPossiblyBilled}))
	id2, err := ledger.ReserveAttempt(b.ctx, b.db.Pool, in("r2"))
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id2, ledger.Outcome{Status: ledger.AttemptOK, CostUSD: 0.3}))
	// r3's worker died mid-call ten minutes ago: its intent is no call in
	// flight any more.
	stale := in("r3")
	stale.Now = time.Now().Add(-10 * time.Minute)
	_, err = ledger.BeginAttempt(b.ctx, b.db.Pool, stale)
	require.NoError(t, err)

	// 0.3 billed + 0.6 stuck + 0.3 asked > 1.0, and nothing is in flight:
	// the batch pauses (the first refusal raises the alert) instead of
	// telling every caller to wait.
	_, err = ledger.ReserveAttempt(b.ctx, b.db.Pool, in("r4"))
	var be *ledger.BudgetError
	require.ErrorAs(t, err, &be)
	require.True(t, be.Paused, "%+v", be)
	require.False(t, be.Wait)
	require.InDelta(t, 0.9, be.SpentUSD, 1e-9, "billed plus stuck estimates")
	require.InDelta(t, 0.6, be.PossiblyBilledUSD, 1e-9)
	require.Zero(t, be.ReservedUSD)
	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, ledger.BatchPausedBudget, st.State)
}

// A call really in flight (an intent younger than the job timeout) is a
// reservation that may come back cheaper: the next caller waits, and once it
// settles without an answer the batch pauses.
func TestReserveAttemptWaitsOnlyForCallsInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	budgeted(t, b, "b1", 1.0, 10)
	in := func(rec string, est float64) ledger.Intent { return costing(rec, est, time.Hour) }
	id1, err := ledger.ReserveAttempt(b.ctx, b.db.Pool, in("r1", 0.5))
	require.NoError(t, err)
	_, err = ledger.ReserveAttempt(b.ctx, b.db.Pool, in("r2", 0.6))
	var be *ledger.BudgetError
	require.ErrorAs(t, err, &be)
	require.True(t, be.Wait, "%+v", be)
	require.InDelta(t, 0.5, be.ReservedUSD, 1e-9)

	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id1, ledger.Outcome{Status: ledger.AttemptPossiblyBilled}))
	_, err = ledger.ReserveAttempt(b.ctx, b.db.Pool, in("r2", 0.6))
	require.ErrorAs(t, err, &be)
	require.True(t, be.Paused, "%+v", be)
}

// Completions of one batch do not wait for each other: a completion
// transaction held open (its result stored, its cost recorded) blocks
// neither another completion of the same batch nor a reservation against
// the batch's cap. The costs land in the counters exactly once.
func TestCompletionsOfOneBatchDoNotSerialize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	budgeted(t, b, "b1", 100, 4)
	var ids []int64
	for _, rec := range []string{"r1", "r2"} {
		id, err := ledger.ReserveAttempt(b.ctx, b.db.Pool, intent("b1", rec, 1))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	complete := func(ctx context.Context, tx ledger.DBTX, id int64, rec string, cost float64) {
		t.Helper()
		require.NoError(t, ledger.FinishAttempt(ctx, tx, id, ledger.Outcome{Status: ledger.AttemptOK, CostUSD: cost}))
		require.NoError(t, ledger.StoreResult(ctx, tx, "b1", rec, id, json.RawMessage(`{}`)))
	}
	held, err := b.db.Pool.Begin(b.ctx)
	require.NoError(t, err)
	defer held.Rollback(context.Background()) //nolint:errcheck
	complete(b.ctx, held, ids[0], "r1", 0.1)

	// Bounded so that a regression fails instead of hanging: today's code
	// took the batch row's lock in FinishAttempt and held it to commit.
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	other, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	complete(ctx, other, ids[1], "r2", 0.2)
	require.NoError(t, other.Commit(ctx), "a second completion of the batch commits while the first is open")
	_, err = ledger.ReserveAttempt(ctx, b.db.Pool, intent("b1", "r3", 1))
	require.NoError(t, err, "a reservation against the cap is not held up either")
	require.NoError(t, held.Commit(b.ctx))

	spent := func() float64 {
		t.Helper()
		bt, err := ledger.GetBatch(b.ctx, b.db.Pool, "b1")
		require.NoError(t, err)
		return bt.SpentUSD
	}
	keySpent := func() float64 {
		t.Helper()
		v, err := ledger.SpendByKey(b.ctx, b.db.Pool, "main", time.Time{})
		require.NoError(t, err)
		return v
	}
	require.InDelta(t, 0.3, spent(), 1e-9, "unfolded costs are read")
	require.InDelta(t, 0.3, keySpent(), 1e-9)
	n, err := ledger.FoldSpend(b.ctx, b.db.Pool)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.InDelta(t, 0.3, spent(), 1e-9, "folded once, not twice")
	require.InDelta(t, 0.3, keySpent(), 1e-9)
	n, err = ledger.FoldSpend(b.ctx, b.db.Pool)
	require.NoError(t, err)
	require.Zero(t, n)
	require.InDelta(t, 0.3, spent(), 1e-9)
}

// Folds running at once from several processes move every cost exactly
// once.
func TestFoldSpendConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 40)
	done := make(chan error)
	go func() {
		for i := range 40 {
			id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", fmt.Sprintf("r%d", i+1), 1))
			if err == nil {
				err = ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{Status: ledger.AttemptOK, CostUSD: 0.25})
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	folders := make(chan error, 4)
	stop := make(chan struct{})
	for range 4 {
		go func() {
			for {
				select {
				case <-stop:
					folders <- nil
					return
				default:
				}
				if _, err := ledger.FoldSpend(b.ctx, b.db.Pool); err != nil {
					folders <- err
					return
				}
			}
		}()
	}
	require.NoError(t, <-done)
	close(stop)
	for range 4 {
		require.NoError(t, <-folders)
	}
	_, err := ledger.FoldSpend(b.ctx, b.db.Pool)
	require.NoError(t, err)
	bt, err := ledger.GetBatch(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.InDelta(t, 10.0, bt.SpentUSD, 1e-9)
	k, err := ledger.KeySpend(b.ctx, b.db.Pool, "main")
	require.NoError(t, err)
	require.InDelta(t, 10.0, k, 1e-9)
}
