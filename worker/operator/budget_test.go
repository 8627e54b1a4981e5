package operator_test

import (
	"context"
	"testing"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/operator"
)

// `triage batch budget` and the web window's budget form are one
// operator.SetBudget: the new cap, the batch paused at its old cap running
// again and its parked jobs woken, in one transaction. A wake that fails
// leaves the batch as it was: no cap set without its jobs woken.
func TestSetBudgetIsOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	require.NoError(t, ledger.SetBatchState(ctx, b.db.Pool, "b1", ledger.BatchPausedBudget))
	// The jobs parked at the cap (snoozed: scheduled later).
	_, err := b.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'scheduled', scheduled_at = now() + interval '1 hour'`)
	require.NoError(t, err)
	state := func() (*float64, ledger.BatchState) {
		t.Helper()
		bt, err := ledger.GetBatch(ctx, b.db.Pool, "b1")
		require.NoError(t, err)
		st, err := ledger.BatchStatus(ctx, b.db.Pool, "b1")
		require.NoError(t, err)
		return bt.BudgetUSD, st.State
	}
	scheduled := []rivertype.JobState{rivertype.JobStateScheduled}
	usd := 5.0

	// The wake fails (River's tables are not where it looks): nothing changed.
	_, _, err = operator.SetBudget(ctx, b.db.Pool, "b1", &usd, operator.ControlOptions{Schema: "no_such_schema"})
	require.Error(t, err)
	budget, st := state()
	require.Nil(t, budget, "the cap is rolled back with the failed wake")
	require.Equal(t, ledger.BatchPausedBudget, st)
	require.Len(t, b.jobsOf(t, "r001", scheduled...), 1)

	before, after, err := operator.SetBudget(ctx, b.db.Pool, "b1", &usd, operator.ControlOptions{Schema: b.db.Schema})
	require.NoError(t, err)
	require.Nil(t, before.BudgetUSD)
	require.NotNil(t, after.BudgetUSD)
	require.InDelta(t, 5.0, *after.BudgetUSD, 1e-9)
	budget, st = state()
	require.NotNil(t, budget)
	require.Equal(t, ledger.BatchRunning, st, "a batch paused at its cap runs again")
	for _, rec := range []string{"r001", "r002"} {
		require.Empty(t, b.jobsOf(t, rec, scheduled...), "%s woken", rec)
		require.Len(t, b.jobsOf(t, rec, rivertype.JobStateAvailable), 1, "%s woken", rec)
	}
}
