package facts

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/keys"
)

// TestFactsAreTheLedgers pins the translation between the
// ledger's and the breakers' words and the decision's own.
func TestFactsAreTheLedgers(t *testing.T) {
	t.Parallel()
	require.Equal(t, ledger.ReasonCancelled, decide.ReasonCancelled, "the dead letter a cancelled batch's record gets")
	for h, want := range map[ledger.LineHold]decide.Line{
		ledger.HoldNone: decide.LineNone, ledger.HoldUnsent: decide.LineUnsent, ledger.HoldLive: decide.LineLive, ledger.HoldAnswered: decide.LineAnswered,
	} {
		require.Equal(t, want, Line(h))
	}
	for s, want := range map[ledger.BatchState]decide.Hold{
		"": decide.HoldNone, ledger.BatchPaused: decide.HoldPaused, ledger.BatchCancelled: decide.HoldCancelled, ledger.BatchRunning: decide.HoldNone,
	} {
		require.Equal(t, want, Hold(s), s)
	}
	for o, want := range map[decide.Outcome]ledger.AttemptStatus{
		decide.OutcomeNone: "", decide.OutcomeOK: ledger.AttemptOK, decide.OutcomeFailed: ledger.AttemptFailed,
		decide.OutcomePossiblyBilled: ledger.AttemptPossiblyBilled,
	} {
		require.Equal(t, want, AttemptStatus(o))
		require.Equal(t, string(want), o.String())
	}
	require.Equal(t, &decide.Admission{Storm: true, Wait: 3}, Admission(keys.Admission{Breaker: keys.BreakerStorm, Wait: 3}))
	require.Equal(t, &decide.Admission{Allowed: true, Probe: true}, Admission(keys.Admission{Allowed: true, Probe: true, Breaker: keys.BreakerExhausted}))
	p := Prior(ledger.Prior{Attempts: 4, OKAttemptID: 3, ResultStored: true, Ambiguous: 2, JobAmbiguous: 1, JobCalls: 2, DeadLettered: true,
		JobLast: ledger.LastAttempt{Seen: true, Unfinished: true, Class: classify.Transient}})
	require.Equal(t, &decide.Prior{OKAttemptID: 3, ResultStored: true, JobAmbiguous: 1, JobCalls: 2, DeadLettered: true,
		JobLast: decide.LastAttempt{Seen: true, Unfinished: true, Class: classify.Transient}}, p)
}

// TestBreakerOutcome: what a finished call (or a batch line's answer)
// tells the key's breakers.
func TestBreakerOutcome(t *testing.T) {
	t.Parallel()
	answered := func(c classify.Class) decide.AfterCall {
		return decide.AfterCall{Verdict: classify.Verdict{Class: c, Reason: "r", Known: true}, Phase: classify.PhaseResponse}
	}
	for _, tc := range []struct {
		name         string
		in           decide.AfterCall
		call, inLine keys.Outcome
	}{
		{"ok", answered(classify.OK), keys.OutcomeSuccess, keys.OutcomeSuccess},
		{"transient", answered(classify.Transient), keys.OutcomeFailure, keys.OutcomeExcluded},
		{"throttled", answered(classify.Throttled), keys.OutcomeExcluded, keys.OutcomeExcluded},
		{"exhausted", answered(classify.Exhausted), keys.OutcomeExhausted, keys.OutcomeExhausted},
		{"ambiguous", answered(classify.Ambiguous), keys.OutcomeExcluded, keys.OutcomeExcluded},
		{"rejected", answered(classify.Rejected), keys.OutcomeRejected, keys.OutcomeRejected},
		{"client refused the request", decide.AfterCall{ClientErr: "bad"}, keys.OutcomeNone, keys.OutcomeOf(classify.Verdict{}.Class)},
		{"stopped before an answer", decide.AfterCall{Cancelled: true, Phase: classify.PhaseSentNoResponse}, keys.OutcomeNone, keys.OutcomeOf(classify.Verdict{}.Class)},
		{"stopped, but the answer had arrived", func() decide.AfterCall {
			a := answered(classify.OK)
			a.Cancelled = true
			return a
		}(), keys.OutcomeSuccess, keys.OutcomeSuccess},
		{"a cut stream", decide.AfterCall{Verdict: classify.Verdict{Class: classify.Ambiguous}, Phase: classify.PhaseStream}, keys.OutcomeExcluded, keys.OutcomeExcluded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.call, BreakerOutcome(tc.in))
			require.Equal(t, tc.inLine, BatchBreakerOutcome(tc.in))
		})
	}
}
