package ledger_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

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
	in := func(rec string) ledger.Intent { return costing(rec, 0.3, 0) }
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

// The fleet retry budget counts synchronous calls only: a provider batch's
// lines, first sends and retries alike, neither raise nor spend it.
func TestRetryUsageCountsSyncCallsOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 4)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, in := range []ledger.Intent{intent("b1", "r1", 1), intent("b1", "r2", 2), intent("b1", "r3", 1), intent("b1", "r4", 2)} {
		in.Now = t0
		if i >= 2 {
			in.Mode = ledger.ModeBatch
		}
		_, err := ledger.BeginAttempt(b.ctx, b.db.Pool, in)
		require.NoError(t, err)
	}
	u, err := ledger.RetryUsageByKey(b.ctx, b.db.Pool, "main", t0.Add(-time.Minute))
	require.NoError(t, err)
	require.Equal(t, ledger.RetryUsage{FirstCalls: 1, OpenRetries: 1}, u)
}

// A batch-mode line waiting for its provider batch is reserved, not
// ambiguous: `triage status` shows its estimate as batch_reserved_usd, and
// possibly_billed_usd keeps meaning "sent, outcome unknown".
func TestStatusAndLedgerShowBatchLinesInFlightApartFromPossiblyBilled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 3)
	sync, line := intent("b1", "r1", 1), intent("b1", "r2", 1)
	sync.EstCostUSD, line.EstCostUSD = 0.01, 0.004
	line.Mode = ledger.ModeBatch
	for _, in := range []ledger.Intent{sync, line} {
		_, err := ledger.BeginAttempt(b.ctx, b.db.Pool, in)
		require.NoError(t, err)
	}
	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
	require.NoError(t, err)
	require.InDelta(t, 0.01, st.PossiblyBilledUSD, 1e-12, "the synchronous call in flight")
	require.InDelta(t, 0.004, st.BatchReservedUSD, 1e-12, "the batch line")
	list, err := ledger.ListBatches(b.ctx, b.db.Pool)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.InDelta(t, 0.004, list[0].BatchReservedUSD, 1e-12)

	total, _, err := ledger.UsageByClass(b.ctx, b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.InDelta(t, 0.01, total.PossiblyBilledUSD, 1e-12, "`triage ledger` splits them as `triage status` does")
	require.InDelta(t, 0.004, total.BatchReservedUSD, 1e-12)
}

// A batch-mode line waiting in a provider batch is in flight however long
// it waits (a batch takes up to 24 h, a line that expired goes into the
// next one with the same attempt), whatever call reserves next: a
// synchronous call of the same auto batch must find the cap full of
// reservations (wait), not spent (pause the batch for a human).
func TestReserveAttemptCountsOpenBatchLinesAsInFlight(t *testing.T) {
	t.Parallel()
	for _, age := range []time.Duration{2 * time.Hour, 30 * time.Hour} {
		t.Run(age.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			budgeted(t, b, "b1", 1.0, 3)
			line := intent("b1", "r1", 1)
			line.EstCostUSD, line.Mode, line.InFlightFor = 0.5, ledger.ModeBatch, 25*time.Hour
			line.Now = time.Now().Add(-age)
			id, err := ledger.ReserveAttempt(b.ctx, b.db.Pool, line)
			require.NoError(t, err)
			_, err = ledger.AddBatchLine(b.ctx, b.db.Pool, ledger.NewBatchLine{Key: "main", Batch: "b1", RecordID: "r1", JobID: line.JobID,
				CustomID: line.IdempotencyKey, AttemptID: id, Body: []byte(`{}`)})
			require.NoError(t, err)

			sync := intent("b1", "r2", 1)
			sync.JobID, sync.EstCostUSD, sync.InFlightFor = 43, 0.6, 90*time.Second
			_, err = ledger.ReserveAttempt(b.ctx, b.db.Pool, sync)
			var be *ledger.BudgetError
			require.ErrorAs(t, err, &be)
			require.True(t, be.Wait, "the line is in flight: wait for it")
			require.False(t, be.Paused)
			require.InDelta(t, 0.5, be.ReservedUSD, 1e-9)
			st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b1")
			require.NoError(t, err)
			require.NotEqual(t, ledger.BatchPausedBudget, st.State)
		})
	}
}
