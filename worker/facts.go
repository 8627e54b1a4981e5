package worker

import (
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/keys"
)

// The facts the decision (worker/decide) is given are its own plain types,
// so that it imports neither the ledger nor the breakers; these turn what
// the ledger and the breakers said into them, and the decided outcome back
// into the ledger's status.

// priorFacts is what the ledger knows about earlier sends, as decided on.
func priorFacts(p ledger.Prior) *decide.Prior {
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

// lineFacts is what an open line allows (ledger.LineHold).
func lineFacts(h ledger.LineHold) decide.Line { return lineHolds[h] }

// holdFacts is a batch's hold by hand.
func holdFacts(s ledger.BatchState) decide.Hold { return batchHolds[s] }

// admissionFacts is the breakers' answer.
func admissionFacts(a keys.Admission) *decide.Admission {
	return &decide.Admission{Allowed: a.Allowed, Probe: a.Probe, Wait: a.Wait, Storm: a.Breaker == keys.BreakerStorm}
}

// stormFacts is what the storm breaker said after hearing a call.
func stormFacts(s keys.StormReport) decide.Storm { return decide.Storm{Open: s.Open, Wait: s.Wait} }

// attemptStatus is the ledger status a decided outcome is written as ("":
// none).
func attemptStatus(o decide.Outcome) ledger.AttemptStatus { return attemptStatuses[o] }

// breakerOutcome is what a finished call tells the key's breakers.
func breakerOutcome(a decide.AfterCall) keys.Outcome {
	if a.ClientErr != "" || a.Stopped() {
		return keys.OutcomeNone
	}
	return keys.OutcomeOf(a.Verdict.Class)
}
