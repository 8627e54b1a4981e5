package decide

import (
	"fmt"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/worker/config"
)

// AfterCall is what a run knows once its call returned.
type AfterCall struct {
	// ClientErr: the client refused to build the request (configuration).
	ClientErr string
	// Cancelled: the run's context ended (shutdown, River's timeout) by the
	// time the call returned; Phase is how far the call got. A cancelled run
	// whose answer arrived (PhaseResponse) is not stopped: the answer was
	// paid for and is used.
	Cancelled bool
	Phase     classify.Phase
	Verdict   classify.Verdict
	// Malformed: a 2xx body that is not the vendor's wire format. Unusable:
	// why the answer breaks the pipeline's output contract ("" if it does
	// not). Malformed implies Unusable.
	Malformed bool
	Unusable  string

	// Counters before this call.
	JobCalls, MaxAttempts          int
	JobAmbiguous, AmbiguousRetries int
	// Policy is the key's ambiguous policy ("" reads as retry).
	Policy config.Ambiguous
	// NoRetries: the key's retry_budget (RetryBudget) is 0.
	NoRetries   bool
	RetryBudget float64
	// Backoff is the jittered exponential backoff for this call's retry
	// (Backoff); BackoffCap caps any wait a transient answer asks for.
	Backoff, BackoffCap time.Duration
	// Throttle is the wait after a throttle (the hint, or the adaptive
	// default); KeyWide says the whole key must wait, not only this job.
	Throttle time.Duration
	KeyWide  bool
	// ProbeInterval of the exhausted breaker.
	ProbeInterval time.Duration
	// Storm: what the storm breaker says after hearing this call.
	Storm Storm
	// Held: the safety net holds the key for this call's failure (a
	// rejection streak or a throttle wall it is part of): the record waits
	// for the key to resume instead of being dead-lettered or snoozed.
	Held bool
	// Change: what a rejection's one changed retry is decided from.
	Change ChangeFacts
	// Partial: what a stream cut midway delivered (PartialChars characters)
	// and the pipeline's accept_partial_min_chars (0: never accepted).
	PartialChars, AcceptPartialMinChars int
	// Fallback: the first capable fallback, for a job whose transient
	// attempts are spent (only Model is read).
	Fallback FallbackFacts
}

// Storm is what the key's storm breaker said after hearing a call
// (keys.StormReport).
type Storm struct {
	// Open: the breaker is open; Wait: until its next probe.
	Open bool
	Wait time.Duration
}

// Stopped: the run was stopped before an answer arrived.
func (a AfterCall) Stopped() bool { return a.Cancelled && a.Phase != classify.PhaseResponse }

// After decides what a finished call leads to.
func After(a AfterCall) Reaction {
	if a.ClientErr != "" {
		r := DeadLetter(classify.Rejected, ReasonConfig, a.ClientErr)
		r.Outcome = OutcomeFailed
		return r
	}
	if a.Stopped() {
		// Not answered: the call may have gone out. Keep it possibly billed
		// and come back without spending an attempt; the next send reuses
		// its idempotency key.
		r := Reaction{Kind: ReactPark, After: time.Second, Outcome: OutcomeFailed}
		if a.Phase == classify.PhaseSentNoResponse || a.Phase == classify.PhaseStream {
			r.Outcome = OutcomePossiblyBilled
		}
		return r
	}
	v := a.Verdict
	if acceptPartial(a) {
		return Reaction{Kind: ReactCompletePartial, Outcome: OutcomePossiblyBilled}
	}
	calls := a.JobCalls + 1
	switch v.Class {
	case classify.OK:
		if a.Unusable != "" {
			r := DeadLetter(classify.OK, ReasonInvalidOutput, a.Unusable)
			// A 2xx body that is not the vendor's format tells no usage: the
			// call may have been billed, so it stays possibly billed at its
			// estimate rather than being recorded as free.
			r.Outcome = OutcomeOK
			if a.Malformed {
				r.Outcome = OutcomePossiblyBilled
			}
			return r
		}
		return Reaction{Kind: ReactComplete, Outcome: OutcomeOK}

	case classify.Transient:
		var r Reaction
		switch {
		case (calls >= a.MaxAttempts || a.NoRetries) && a.Fallback.Model != nil:
			// Spent on this model: a capable fallback gets the record, with
			// attempts of its own. Refused by fallback_max_share, it is
			// dead-lettered as it would have been.
			r = fallback(a.Fallback.Model, DeadLetter(classify.Transient, ReasonRetriesExhausted, fmt.Sprintf("%d attempts (max_attempts %d, key retry_budget %g); last: %s; fallback_max_share reached",
				calls, a.MaxAttempts, a.RetryBudget, v.Reason)))
			r.Fallback.Otherwise.Outcome = OutcomeFailed
		case calls >= a.MaxAttempts || a.NoRetries:
			r = DeadLetter(classify.Transient, ReasonRetriesExhausted, fmt.Sprintf("%d attempts (max_attempts %d, key retry_budget %g); last: %s",
				calls, a.MaxAttempts, a.RetryBudget, v.Reason))
		case a.Storm.Open:
			r = Reaction{Kind: ReactStorm, After: min(a.Storm.Wait, BreakerPark)}
		default:
			r = Reaction{Kind: ReactRetry, After: TransientWait(a.Backoff, RetryAfter(v), a.BackoffCap)}
		}
		r.Outcome = OutcomeFailed
		return r

	case classify.Throttled:
		if a.Held {
			return Reaction{Kind: ReactTrip, After: a.ProbeInterval, Outcome: OutcomeFailed}
		}
		r := throttled(a.Throttle, a.KeyWide)
		r.Outcome = OutcomeFailed
		return r

	case classify.Exhausted:
		return Reaction{Kind: ReactTrip, After: a.ProbeInterval, Outcome: OutcomeFailed}

	case classify.Ambiguous:
		var r Reaction
		switch {
		case a.Policy == config.AmbiguousDeadLetter:
			r = DeadLetter(classify.Ambiguous, ReasonAmbiguousUnresolved,
				fmt.Sprintf("no answer, possibly billed; key ambiguous policy dead_letter: not resent; last: %s", v.Reason))
		case a.Policy == config.AmbiguousLookup:
			// The next run looks the call up before anything else (and
			// gives up there, once lookup_wait passed, if the sends are
			// used up): the store may have this very send's answer.
			r = Reaction{Kind: ReactRetry, After: a.Backoff}
		case a.JobAmbiguous+1 > a.AmbiguousRetries || calls >= a.MaxAttempts:
			r = DeadLetter(classify.Ambiguous, ReasonAmbiguousExhausted,
				fmt.Sprintf("no answer after %d sends with the same idempotency key; last: %s", a.JobAmbiguous+1, v.Reason))
		default:
			r = Reaction{Kind: ReactRetry, After: a.Backoff}
		}
		r.Outcome = OutcomePossiblyBilled
		return r

	default: // Rejected
		if a.Held {
			return Reaction{Kind: ReactTrip, After: a.ProbeInterval, Outcome: OutcomeFailed}
		}
		r, ok := changedRetry(a)
		if !ok {
			r = DeadLetter(classify.Rejected, v.Reason, rejectedDetail(a))
		}
		r.Outcome = OutcomeFailed
		return r
	}
}

// throttled is the reaction to a throttle: the whole key waits when the
// provider says so (keyWide), else only the job that was told. Today every
// throttle is key-wide (see the worker's use); pacing decides keyWide.
func throttled(wait time.Duration, keyWide bool) Reaction {
	if keyWide {
		return Reaction{Kind: ReactPauseKey, After: wait}
	}
	return Reaction{Kind: ReactSnooze, After: wait}
}

// TransientWait is a transient failure's retry wait: the backoff, or longer
// when the answer asked for longer, but never more than limit (the
// backoff cap, 5 min): a 503 with retry-after: 86400 must not park a
// record for a day.
func TransientWait(backoff, hint, limit time.Duration) time.Duration {
	return min(max(backoff, hint), max(limit, backoff))
}

// RetryAfter is the wait the verdict's answer asked for; 0 for none.
func RetryAfter(v classify.Verdict) time.Duration {
	if v.RetryAfterS == nil || *v.RetryAfterS <= 0 {
		return 0
	}
	return time.Duration(*v.RetryAfterS * float64(time.Second))
}

// acceptPartial: a cut stream (still ambiguous: the classifier's verdict on
// a broken stream) delivered at least the pipeline's minimum, so its
// partial text is the result rather than a reason to pay for a resend.
func acceptPartial(a AfterCall) bool {
	return a.AcceptPartialMinChars > 0 && a.Phase == classify.PhaseStream &&
		a.Verdict.Class == classify.Ambiguous && a.PartialChars >= a.AcceptPartialMinChars
}
