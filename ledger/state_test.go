package ledger_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
)

// A batch's state comes from its key's breaker, not from what the batch last
// stored: settled first, then paused_exhausted while the breaker is not
// closed, then paused_budget as stored, else running.
func TestBatchStateFollowsTheBreaker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := keys.DefaultStore(b.db.Pool)
	adm, err := store.Admit(b.ctx, "open", 0)
	require.NoError(t, err)
	_, err = store.Trip(b.ctx, "open", adm, "test", time.Hour)
	require.NoError(t, err)
	_, err = store.Admit(b.ctx, "closed", 0) // a key with no breaker row at all
	require.NoError(t, err)

	for _, tc := range []struct {
		name, key string
		records   int
		stored    ledger.BatchState
		want      ledger.BatchState
	}{
		{"settled beats an open breaker", "open", 0, ledger.BatchRunning, ledger.BatchSettled},
		{"open breaker", "open", 1, ledger.BatchRunning, ledger.BatchPausedExhausted},
		{"stale stored exhaustion", "closed", 1, ledger.BatchPausedExhausted, ledger.BatchRunning},
		{"budget as stored", "closed", 1, ledger.BatchPausedBudget, ledger.BatchPausedBudget},
		{"running", "closed", 1, ledger.BatchRunning, ledger.BatchRunning},
	} {
		id := tc.name
		require.NoError(t, ledger.CreateBatch(b.ctx, b.db.Pool, ledger.Batch{ID: id, Pipeline: "enrich", Key: tc.key}, records(tc.records)))
		require.NoError(t, ledger.SetBatchState(b.ctx, b.db.Pool, id, tc.stored))
		st, err := ledger.BatchStatus(b.ctx, b.db.Pool, id)
		require.NoError(t, err)
		require.Equal(t, tc.want, st.State, tc.name)
	}
	list, err := ledger.ListBatches(b.ctx, b.db.Pool)
	require.NoError(t, err)
	require.Len(t, list, 5)
}
