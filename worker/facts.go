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
		DeadLettered: p.DeadLettered,
		JobLast:      decide.LastAttempt{Seen: p.JobLast.Seen, Unfinished: p.JobLast.Unfinished, Class: p.JobLast.Class},
	}
}

// lineFacts is what an open line allows (ledger.LineHold).
func lineFacts(h ledger.LineHold) decide.Line {
	switch h {
	case ledger.HoldUnsent:
		return decide.LineUnsent
	case ledger.HoldLive:
		return decide.LineLive
	case ledger.HoldAnswered:
		return decide.LineAnswered
	}
	return decide.LineNone
}

// holdFacts is a batch's hold by hand.
func holdFacts(s ledger.BatchState) decide.Hold {
	switch s {
	case ledger.BatchPaused:
		return decide.HoldPaused
	case ledger.BatchCancelled:
		return decide.HoldCancelled
	}
	return decide.HoldNone
}

// admissionFacts is the breakers' answer.
func admissionFacts(a keys.Admission) *decide.Admission {
	return &decide.Admission{Allowed: a.Allowed, Probe: a.Probe, Wait: a.Wait, Storm: a.Breaker == keys.BreakerStorm}
}

// stormFacts is what the storm breaker said after hearing a call.
func stormFacts(s keys.StormReport) decide.Storm { return decide.Storm{Open: s.Open, Wait: s.Wait} }

// attemptStatus is the ledger status a decided outcome is written as ("":
// none).
func attemptStatus(o decide.Outcome) ledger.AttemptStatus {
	switch o {
	case decide.OutcomeOK:
		return ledger.AttemptOK
	case decide.OutcomeFailed:
		return ledger.AttemptFailed
	case decide.OutcomePossiblyBilled:
		return ledger.AttemptPossiblyBilled
	}
	return ""
}

// breakerOutcome is what a finished call tells the key's breakers.
func breakerOutcome(a decide.AfterCall) keys.Outcome {
	if a.ClientErr != "" || a.Stopped() {
		return keys.OutcomeNone
	}
	return keys.OutcomeOf(a.Verdict.Class)
}
