package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

// jobOf returns the River job id of a record.
func (b *testBundle) jobOf(t *testing.T, batch, record string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT id FROM river_job WHERE args->>'batch' = $1 AND args->>'record_id' = $2`, batch, record).Scan(&id))
	return id
}

// A job cancelled by hand and one deleted by hand (River's CLI or UI) are
// neither completed nor dead-lettered by the worker. The sweep dead-letters
// their records, the batch settles, and its status counts them as
// cancelled; nothing of theirs reached the provider.
func TestJobsCancelledOrDeletedByHandSettleTheBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{}, tweaks{})
	b.opts.SpendCheck = 20 * time.Millisecond
	b.enqueue(t, "b1", records(4, nil))
	rt := b.newRuntime(t)
	ctx := context.Background()
	_, err := rt.River().JobCancel(ctx, b.jobOf(t, "b1", "r002"))
	require.NoError(t, err)
	_, err = rt.River().JobDelete(ctx, b.jobOf(t, "b1", "r003"))
	require.NoError(t, err)
	b.run(t, rt)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, 2, st.DeadLettered)
	require.Equal(t, 2, st.Cancelled)
	reasons := map[string]string{}
	for _, dl := range b.deadLetters(t, "b1") {
		reasons[dl.RecordID] = dl.Reason
	}
	require.Equal(t, map[string]string{"r002": ledger.ReasonCancelledByHand, "r003": ledger.ReasonJobMissing}, reasons)
	stats := b.fake.Stats()
	require.Zero(t, stats.ByRecord["r002"].Requests)
	require.Zero(t, stats.ByRecord["r003"].Requests)
}
