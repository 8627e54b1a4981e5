// Package facts turns what the ledger and the key's breakers say into the
// decision's own plain types (worker/decide), and a decided outcome back
// into the ledger's words, so that the decision imports neither the ledger
// nor the breakers. The worker's runs and its fallback mover
// (worker/fallbackmove) gather their facts through it.
package facts

import (
	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/keys"
)

// Prior is what the ledger knows about earlier sends, as decided on.
func Prior(p ledger.Prior) *decide.Prior {
	return &decide.Prior{
		OKAttemptID: p.OKAttemptID, ResultStored: p.ResultStored, JobAmbiguous: p.JobAmbiguous, JobCalls: p.JobCalls,
		DeadLettered: p.DeadLettered, PendingResponse: p.PendingResponse,
		JobLast: decide.LastAttempt{Seen: p.JobLast.Seen, Unfinished: p.JobLast.Unfinished, Class: p.JobLast.Class},
	}
}

// The ledger's states as the decision's facts, and back; a state not
// listed maps to the zero value (no line, no hold, no status).
var (
	lineHolds = map[ledger.LineHold]decide.Line{
		ledger.HoldUnsent: decide.LineUnsent, ledger.HoldLive: decide.LineLive, ledger.HoldAnswered: decide.LineAnswered,
	}
	batchHolds = map[ledger.BatchState]decide.Hold{
		ledger.BatchPaused: decide.HoldPaused, ledger.BatchCancelled: decide.HoldCancelled,
	}
	attemptStatuses = map[decide.Outcome]ledger.AttemptStatus{
		decide.OutcomeOK: ledger.AttemptOK, decide.OutcomeFailed: ledger.AttemptFailed,
		decide.OutcomePossiblyBilled: ledger.AttemptPossiblyBilled,
	}
)

// Line is what an open line allows (ledger.LineHold).
func Line(h ledger.LineHold) decide.Line { return lineHolds[h] }

// Hold is a batch's hold by hand.
func Hold(s ledger.BatchState) decide.Hold { return batchHolds[s] }

// Admission is the breakers' answer.
func Admission(a keys.Admission) *decide.Admission {
	return &decide.Admission{Allowed: a.Allowed, Probe: a.Probe, Wait: a.Wait, Storm: a.Breaker == keys.BreakerStorm}
}

// Storm is what the storm breaker said after hearing a call.
func Storm(s keys.StormReport) decide.Storm { return decide.Storm{Open: s.Open, Wait: s.Wait} }

// AttemptStatus is the ledger status a decided outcome is written as ("":
// none).
func AttemptStatus(o decide.Outcome) ledger.AttemptStatus { return attemptStatuses[o] }

// BreakerOutcome is what a finished call tells the key's breakers.
func BreakerOutcome(a decide.AfterCall) keys.Outcome {
	if a.ClientErr != "" || a.Stopped() {
		return keys.OutcomeNone
	}
	return keys.OutcomeOf(a.Verdict.Class)
}

// BatchBreakerOutcome is what a batch line tells the key's breakers: an
// exhausted balance trips the key as a call would; the rest (a line's 5xx,
// its throttle) is about the batch's processing, not about the key's
// synchronous endpoint being up, so it does not feed the storm breaker.
// The job applying the line made no call: a probe claim it holds is given
// back, never settled by the stored answer (keys.Heard, in report).
func BatchBreakerOutcome(a decide.AfterCall) keys.Outcome {
	if a.Verdict.Class == classify.Transient {
		return keys.OutcomeExcluded
	}
	return keys.OutcomeOf(a.Verdict.Class)
}
