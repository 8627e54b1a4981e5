package ledger_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
)

func budgeted(t *testing.T, b *testBundle, id string, usd float64, n int) {
	t.Helper()
	require.NoError(t, ledger.CreateBatch(b.ctx, b.db.Pool, ledger.Batch{ID: id, Pipeline: "enrich", Key: "main", BudgetUSD: &usd}, records(n)))
}

func TestReserveAttemptStopsAtTheCapAndPausesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	budgeted(t, b, "b1", 1.0, 10)
	in := func(rec string) ledger.Intent {
		i := intent("b1", rec, 1)
		i.EstCostUSD = 0.3
		return i
	}
	var ids []int64
	for _, rec := range []string{"r1", "r2", "r3"} {
		id, err := ledger.ReserveAttempt(b.ctx, b.db.Pool, in(rec))
		require.NoError(t, err, "0.9 of 1.0 reserved")
		ids = append(ids, id)
	}
	// No room while those are in flight, but room once they settle: wait,
	// do not pause.
	_, err := ledger.ReserveAttempt(b.ctx, b.db.Pool, in("r4"))
	var be *ledger.BudgetError
	require.ErrorAs(t, err, &be)
	require.ErrorIs(t, err, ledger.ErrBudgetReached)
	require.True(t, be.Wait)
	require.False(t, be.Paused)
	require.InDelta(t, 0.9, be.ReservedUSD, 1e-9)

	// They cost what they reserved: now the next call would pass the cap
	// with nothing in flight, and the batch pauses, once.
	for _, id := range ids {
		require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{Status: ledger.AttemptOK, CostUSD: 0.3}))
	}
	_, err = ledger.ReserveAttempt(b.ctx, b.db.Pool, in("r4"))
	require.ErrorAs(t, err, &be)
	require.True(t, be.Paused, "the first refusal with nothing in flight pauses the batch")
	require.False(t, be.Wait)

	_, err = ledger.ReserveAttempt(b.ctx, b.db.Pool, in("r5"))
	require.ErrorAs(t, err, &be)
	require.False(t, be.Paused, "only one caller pauses it")
	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, ledger.BatchPausedBudget, st.State)

	// Raising the budget resumes the batch.
	more := 5.0
	require.NoError(t, ledger.SetBatchBudget(b.ctx, b.db.Pool, "b1", &more))
	_, err = ledger.ReserveAttempt(b.ctx, b.db.Pool, in("r4"))
	require.NoError(t, err)
}

func TestReserveAttemptWithoutBudgetAlwaysReserves(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 1)
	i := intent("b1", "r1", 1)
	i.EstCostUSD = 1e6
	_, err := ledger.ReserveAttempt(b.ctx, b.db.Pool, i)
	require.NoError(t, err)
	_, err = ledger.ReserveAttempt(b.ctx, b.db.Pool, intent("nope", "r1", 1))
	require.ErrorIs(t, err, ledger.ErrNotFound)
}

// Concurrent workers cannot pass the cap together: exactly as many
// reservations as fit are granted.
func TestReserveAttemptConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	budgeted(t, b, "b1", 1.0, 40)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted, refused := 0, 0
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := intent("b1", fmt.Sprintf("r%d", i+1), 1)
			in.EstCostUSD = 0.1
			_, err := ledger.ReserveAttempt(b.ctx, b.db.Pool, in)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				granted++
			case errors.Is(err, ledger.ErrBudgetReached):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 10, granted, "1.0 / 0.1")
	require.Equal(t, 30, refused)
}

func TestClaimOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, err := ledger.ClaimOnce(b.ctx, b.db.Pool, "main", "prepaid_70")
	require.NoError(t, err)
	require.True(t, first)
	again, err := ledger.ClaimOnce(b.ctx, b.db.Pool, "main", "prepaid_70")
	require.NoError(t, err)
	require.False(t, again)
}
