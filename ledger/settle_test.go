package ledger_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
)

// A settle is announced once, fleet-wide: of eight processes claiming at
// once, exactly one gets the batch; a running batch is not claimed; a
// requeue makes the batch pending again and its next settle is claimed
// anew.
func TestClaimSettledOncePerSettle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 2)
	b.batch(t, "b2", 2)
	dead := func(batch, record string) int64 {
		t.Helper()
		id, err := ledger.AddDeadLetter(b.ctx, b.db.Pool, ledger.DeadLetterRow{Batch: batch, RecordID: record, Pipeline: "enrich",
			Key: "main", Class: classify.Rejected, Reason: "bad_request", Attempts: 1})
		require.NoError(t, err)
		return id
	}
	claimAtOnce := func() []string {
		t.Helper()
		var (
			mu  sync.Mutex
			got []string
			wg  sync.WaitGroup
		)
		start := make(chan struct{})
		for range 8 {
			wg.Go(func() {
				<-start
				claims, err := ledger.ClaimSettled(b.ctx, b.db.Pool)
				require.NoError(t, err)
				mu.Lock()
				defer mu.Unlock()
				for _, c := range claims {
					got = append(got, c.Batch)
				}
			})
		}
		close(start)
		wg.Wait()
		return got
	}

	dead("b1", "r1")
	dead("b2", "r1")
	require.Empty(t, claimAtOnce(), "no batch has settled")
	id := dead("b1", "r2")
	require.Equal(t, []string{"b1"}, claimAtOnce(), "b1 settled: announced by exactly one")
	require.Empty(t, claimAtOnce(), "announced already")

	_, err := ledger.MarkRequeued(b.ctx, b.db.Pool, []int64{id})
	require.NoError(t, err)
	require.Empty(t, claimAtOnce(), "requeued: pending again")
	dead("b1", "r2")
	require.Equal(t, []string{"b1"}, claimAtOnce(), "settled again: announced again, once")

	require.NoError(t, ledger.SetBatchState(b.ctx, b.db.Pool, "b2", ledger.BatchCancelled))
	dead("b2", "r2")
	claims, err := ledger.ClaimSettled(b.ctx, b.db.Pool)
	require.NoError(t, err)
	require.Equal(t, []ledger.SettleClaim{{Batch: "b2", CancelledByHand: true}}, claims)
}
