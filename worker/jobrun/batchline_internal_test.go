package jobrun

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
)

// The open line's own intent is not an earlier send whose worker died.
func TestBatchPriorLeavesOutTheLinesIntent(t *testing.T) {
	t.Parallel()
	p := ledger.Prior{JobCalls: 3, JobAmbiguous: 1, Ambiguous: 1, JobLast: ledger.LastAttempt{Seen: true, Unfinished: true}}
	batchPrior(&p, ledger.BatchLine{ID: 7, State: ledger.LineAnswered, AttemptID: 9})
	require.Equal(t, 2, p.JobCalls)
	require.Zero(t, p.JobAmbiguous)
	require.Zero(t, p.Ambiguous)
	require.False(t, p.JobLast.Retry())

	q := ledger.Prior{JobCalls: 3}
	batchPrior(&q, ledger.BatchLine{})
	require.Equal(t, 3, q.JobCalls, "no open line: nothing to leave out")
}
