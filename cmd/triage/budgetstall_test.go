package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

// A capped batch with a call that hangs after it was billed: the send's
// estimate never settles, so it counts as spent. Once the cap is reached the
// batch moves to paused_budget, the alert fires and `run` stops with exit 4
// at once, rather than sitting "running" until --max-wait.
func TestRunCappedBatchWithHungCallReachesPausedBudget(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{RecordScripts: map[string][]fakeprovider.Step{
		"r001": {{Action: fakeprovider.ActionHang}},
	}}, "max_tokens = 50\n")
	// One call's estimate is about $0.00003: a handful fit under the cap.
	r := c.run(jsonl(40), "run", "--pipeline", "enrich", "--batch", "b1", "--budget", "0.0002",
		"--max-wait", "3m", "--progress-interval", "100ms", "-")
	require.Equal(t, exitQueued, r.code, r.stderr)
	require.Contains(t, r.stderr, "stopped: the batch's budget is spent", "not --max-wait")
	st, err := ledger.BatchStatus(context.Background(), c.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, ledger.BatchPausedBudget, st.State)
	require.Positive(t, st.Pending)
	require.Positive(t, st.PossiblyBilledUSD, "the hung call is possibly billed")
	require.GreaterOrEqual(t, c.fake.Stats().ByRecord["r001"].Requests, 1)
	var alerts int
	require.NoError(t, c.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM triage_alert WHERE kind = 'budget_reached' AND batch = 'b1'`).Scan(&alerts))
	require.Equal(t, 1, alerts, "the budget alert fired once")
}
