package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
)

// A batch line's answer is decided as a synchronous call's; only the waits
// become "the next provider batch".
func TestBatchReaction(t *testing.T) {
	t.Parallel()
	base := after{JobCalls: 1, MaxAttempts: 6, AmbiguousRetries: 1, RetryBudget: 0.2,
		Backoff: batchRequeueWait, BackoffCap: batchRequeueWait, ProbeInterval: time.Minute, Phase: classify.PhaseResponse}
	for _, tc := range []struct {
		class   classify.Class
		want    ReactionKind
		outcome ledger.AttemptStatus
		breaker keys.Outcome
	}{
		{classify.OK, ReactComplete, ledger.AttemptOK, keys.OutcomeSuccess},
		{classify.Rejected, ReactDeadLetter, ledger.AttemptFailed, keys.OutcomeRejected},
		{classify.Transient, ReactPark, ledger.AttemptFailed, keys.OutcomeExcluded},
		{classify.Throttled, ReactPark, ledger.AttemptFailed, keys.OutcomeExcluded},
		{classify.Exhausted, ReactTrip, ledger.AttemptFailed, keys.OutcomeExhausted},
	} {
		t.Run(tc.class.String(), func(t *testing.T) {
			t.Parallel()
			a := base
			a.Verdict = classify.Verdict{Class: tc.class, Reason: "r", Known: true}
			a.Throttle = batchRequeueWait
			rx := batchReaction(decideAfter(a))
			require.Equal(t, tc.want, rx.Kind, rx.String())
			require.Equal(t, tc.outcome, rx.Outcome)
			require.Equal(t, tc.breaker, batchBreakerOutcome(a))
			if rx.Kind == ReactPark {
				require.Equal(t, batchRequeueWait, rx.After)
			}
		})
	}
	// Spent attempts end in the dead letters, as for a synchronous call.
	a := base
	a.JobCalls = 5
	a.Verdict = classify.Verdict{Class: classify.Transient, Reason: "server_error", Known: true}
	rx := batchReaction(decideAfter(a))
	require.Equal(t, ReactDeadLetter, rx.Kind)
	require.Equal(t, ReasonRetriesExhausted, rx.Reason)
}

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
