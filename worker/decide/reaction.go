package decide

import (
	"fmt"
	"time"

	"github.com/triage-dev/triage/classify"
)

// Dead-letter reasons the worker itself decides. A rejected call is
// dead-lettered with the classifier's own reason (Verdict.Reason).
const (
	// ReasonRetriesExhausted: max_attempts calls failed transiently (or the
	// key's retry_budget is 0, so a transient failure is not retried).
	ReasonRetriesExhausted = "retries_exhausted"
	// ReasonAmbiguousExhausted: ambiguous_retries sends got no answer.
	ReasonAmbiguousExhausted = "ambiguous_retries_exhausted"
	// ReasonAmbiguousUnresolved: a possibly billed attempt on a key whose
	// ambiguous policy is dead_letter: never resent, a person decides.
	ReasonAmbiguousUnresolved = "ambiguous_unresolved"
	// ReasonSnoozedOut: waited longer than the worker's MaxAge, or snoozed
	// by its own throttling more than max_snoozes times.
	ReasonSnoozedOut = "snoozed_out"
	// ReasonInvalidOutput: a 2xx answer that breaks the pipeline's output
	// contract (or is not the vendor's wire format).
	ReasonInvalidOutput = "invalid_output"
	// ReasonConfig: the job cannot be run with this configuration (unknown
	// pipeline, a key this process does not hold, a record that is not an
	// object, a request the client refuses to build).
	ReasonConfig = "config_error"
	// ReasonTemplate: the pipeline's prompt template failed on the record.
	ReasonTemplate = "template_error"
	// ReasonWorkerErrors: the job's runs kept failing for the worker's own
	// reasons (database errors, panics) before any call could be made.
	ReasonWorkerErrors = "worker_errors"
	// ReasonCancelled: the record's batch was cancelled by hand (`triage
	// batch cancel`) before the record had an outcome. The ledger reads
	// the same word (ledger.ReasonCancelled; a worker test holds them
	// equal).
	ReasonCancelled = "cancelled"
)

// ReactionKind is what one run of a job ends in.
type ReactionKind int

const (
	// ReactGo: nothing decided yet; go on to the next step (before the call).
	ReactGo ReactionKind = iota
	// ReactComplete: store the result and complete the job in one transaction.
	ReactComplete
	// ReactRetry: send again after After. A snooze that River does not count
	// as an attempt: the ledger counts the calls (Prior.JobCalls), so runs
	// that failed for the worker's own reasons spend none of max_attempts.
	ReactRetry
	// ReactSnooze: the job's own snooze (it was throttled); it counts against
	// the pipeline's max_snoozes.
	ReactSnooze
	// ReactPark: the fleet's doing (an open breaker, a paused key, a spend
	// cap, a deferred retry, a stop); snooze for After without charging the
	// job a snooze.
	ReactPark
	// ReactPauseKey: throttled, and the whole key must wait: pause the key
	// fleet-wide for After, lower this process's concurrency and snooze the
	// job (its own snooze).
	ReactPauseKey
	// ReactTrip: the key is exhausted. The breaker was told (Done); alert if
	// this call opened it, and park the job until the probe.
	ReactTrip
	// ReactStorm: a transient failure while the key's storm breaker is open:
	// park until its next probe, without spending an attempt.
	ReactStorm
	// ReactDeadLetter: record a dead letter (Class, Reason, Detail) and cancel
	// the job; never resent unchanged.
	ReactDeadLetter
	// ReactCancel: the record was dead-lettered by an earlier run whose
	// cancel did not land: cancel without calling.
	ReactCancel
	// ReactCacheHit: the response cache holds an answer to this very
	// request: record a $0 cache_hit attempt, store the answer and complete
	// the job in one transaction, without a call.
	ReactCacheHit
	// ReactRetryChanged: a rejection a changed request can get past (see
	// changedRetry): keep the Change in the job and send the changed request
	// at once, under its own idempotency key. At most once per job.
	ReactRetryChanged
	// ReactCompletePartial: a cut stream delivered enough text for the
	// pipeline's accept_partial_min_chars: store the partial text as the
	// result (marked partial) and complete the job. The attempt stays
	// possibly billed.
	ReactCompletePartial
	// ReactFallback: move the job to Fallback.Model's key queue (its
	// breaker, pacing and prices).
	ReactFallback
	// ReactLookup: the key's policy is lookup and an earlier call of the
	// job got no answer: ask the provider's store for it, then decide again
	// with what it said (BeforeCall.Lookup).
	ReactLookup
	// ReactCompleteFound: the store had the lost call: settle its attempt
	// as billed once, store the stored answer and complete the job.
	ReactCompleteFound
)

var reactionNames = [...]string{
	ReactGo: "go", ReactComplete: "complete", ReactRetry: "retry", ReactSnooze: "snooze", ReactPark: "park",
	ReactPauseKey: "pause_key", ReactTrip: "trip", ReactStorm: "storm", ReactDeadLetter: "dead_letter", ReactCancel: "cancel",
	ReactCacheHit:        "cache_hit",
	ReactRetryChanged:    "retry_changed",
	ReactCompletePartial: "complete_partial",
	ReactFallback:        "fallback",
	ReactLookup:          "lookup",
	ReactCompleteFound:   "complete_found",
}

func (k ReactionKind) String() string {
	if k < 0 || int(k) >= len(reactionNames) {
		return fmt.Sprintf("ReactionKind(%d)", int(k))
	}
	return reactionNames[k]
}

// Outcome is what a run's call came to, for its ledger attempt; the worker
// writes it as the attempt's status.
type Outcome int

const (
	// OutcomeNone: no call was made, or its outcome is written elsewhere.
	OutcomeNone Outcome = iota
	// OutcomeOK: answered and billed as the usage says.
	OutcomeOK
	// OutcomeFailed: answered with a failure, or never sent.
	OutcomeFailed
	// OutcomePossiblyBilled: may have been billed with no usable answer
	// (sent with no answer, a cut stream, a 2xx that tells no usage).
	OutcomePossiblyBilled
)

var outcomeNames = [...]string{OutcomeNone: "", OutcomeOK: "ok", OutcomeFailed: "failed", OutcomePossiblyBilled: "possibly_billed"}

func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
	return outcomeNames[o]
}

// Reaction is a decided reaction: a value, so that deciding can be tested
// without a database and the worker's apply is the only place that acts on
// it.
type Reaction struct {
	Kind ReactionKind
	// After: how long to wait (Retry, Snooze, Park, PauseKey, Trip, Storm).
	After time.Duration
	// Class, Reason and Detail of a dead letter.
	Class  classify.Class
	Reason string
	Detail string
	// Outcome is what this run's attempt came to; OutcomeNone when no call
	// was made (or its outcome is written elsewhere).
	Outcome Outcome
	// Change of a RetryChanged.
	Change Change
	// Fallback: where a ReactFallback goes (nil otherwise).
	Fallback *FallbackMove
}

func (r Reaction) String() string {
	switch r.Kind {
	case ReactFallback:
		return fmt.Sprintf("fallback(%s)", r.Fallback.Model.Name)
	case ReactDeadLetter:
		return fmt.Sprintf("dead_letter(%s, %s)", r.Class, r.Reason)
	case ReactGo, ReactComplete, ReactCancel, ReactCacheHit, ReactCompletePartial, ReactLookup, ReactCompleteFound:
		return r.Kind.String()
	case ReactRetryChanged:
		return fmt.Sprintf("%s(%s)", r.Kind, r.Change)
	}
	return fmt.Sprintf("%s(%s)", r.Kind, r.After)
}

// DeadLetter is the reaction that ends a record in the dead letters.
func DeadLetter(class classify.Class, reason, detail string) Reaction {
	return Reaction{Kind: ReactDeadLetter, Class: class, Reason: reason, Detail: detail}
}
