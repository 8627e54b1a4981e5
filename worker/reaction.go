package worker

import (
	"fmt"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
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
	// ReasonSnoozedOut: waited longer than Options.MaxAge, or snoozed by its
	// own throttling more than max_snoozes times.
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
	// possibly billed (streaming.go).
	ReactCompletePartial
	// ReactFallback: move the job to Fallback.Model's key queue (its
	// breaker, pacing and prices); see worker/fallback.go.
	ReactFallback
	// ReactLookup: the key's policy is lookup and an earlier call of the
	// job got no answer: ask the provider's store for it (lookup.go), then
	// decide again with what it said (before.Lookup).
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

// Reaction is a decided reaction: a value, so that deciding can be tested
// without a database and apply is the only place that acts on it.
type Reaction struct {
	Kind ReactionKind
	// After: how long to wait (Retry, Snooze, Park, PauseKey, Trip, Storm).
	After time.Duration
	// Class, Reason and Detail of a dead letter.
	Class  classify.Class
	Reason string
	Detail string
	// Outcome is the ledger status of this run's attempt; "" when no call
	// was made (or its outcome is written elsewhere).
	Outcome ledger.AttemptStatus
	// Change of a RetryChanged.
	Change change
	// Fallback: where a ReactFallback goes (nil otherwise).
	Fallback *fallbackMove
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

func deadLetter(class classify.Class, reason, detail string) Reaction {
	return Reaction{Kind: ReactDeadLetter, Class: class, Reason: reason, Detail: detail}
}

// before is what a run knows before its call, step by step: fields of
// steps not reached yet are nil.
type before struct {
	// The job and its pipeline.
	Attempt          int // River's attempt: 1 + runs that ended in the worker's own errors
	MaxAttempts      int
	AmbiguousRetries int
	// Policy is the key's ambiguous policy ("" reads as retry).
	Policy      config.Ambiguous
	Age, MaxAge time.Duration
	OwnSnoozes  int
	MaxSnoozes  int
	// Admission is the breakers' answer and the key's active pause (nil:
	// none); nil before admission.
	Admission *keys.Admission
	Pause     *time.Duration // time left on the key's pause
	// Prior is what the ledger knows about earlier sends; nil before the
	// look-up.
	Prior *ledger.Prior
	// CacheHit: the response cache holds an unexpired answer to this
	// request (read with Prior; only for a pipeline with cache = true and a
	// job without NoCache).
	CacheHit bool
	// OverRetryBudget: this send is a retry and the key's fleet-wide retry
	// budget is spent.
	OverRetryBudget bool
	RetryDefer      time.Duration // jittered wait of a deferred retry
	// Budget is the spend cap's refusal of the intent, nil when it was
	// accepted (or not asked yet).
	Budget        *ledger.BudgetError
	BudgetRecheck time.Duration // jittered
	// DeadlineNear: the waits before the call (for a concurrency slot, for
	// the pace) left too little of the run's deadline for it
	// (Runtime.deadlineNear).
	DeadlineNear bool
	// Fallback: where the job could go while its key's breaker is open.
	Fallback fallbackInput
	// Line is what the job's open provider-batch line allows (HoldNone
	// before it is read, or without one); LineWait how long a job waiting
	// for its line's answer sleeps (the submitter wakes it sooner).
	Line     ledger.LineHold
	LineWait time.Duration
	// ResultStored: the record has a result already (a run of a job whose
	// record another run of it completed: River's rescuer re-ran it), read
	// before a check that ends the record without reading the ledger.
	ResultStored bool
	// Hold is the batch's state when paused or cancelled by hand
	// (ledger.BatchPaused, ledger.BatchCancelled), "" otherwise; read with
	// Prior, or from the intent's refusal (ledger.HeldError).
	Hold        ledger.BatchState
	HoldRecheck time.Duration // how long a paused batch's job parks
	// Lookup is what the provider's store said about the job's unanswered
	// calls (policy lookup); zero before it was asked.
	Lookup lookupFacts
}

// lookupFacts is what a look-up of a lost call found.
type lookupFacts struct {
	// Asked: the store was asked in this run. Found: it had the call.
	// Unusable: why the stored answer breaks the output contract.
	Asked, Found bool
	Unusable     string
	// Waited is how long the job has been looking for its current lost
	// call; Wait the key's lookup_wait; Recheck how long it parks before
	// asking again.
	Waited, Wait, Recheck time.Duration
}

// decideBefore decides, from what a run knows so far, whether it ends
// before its call. ReactGo means: go on. The checks run in the order of the
// steps, so calling it again after a step is harmless.
func decideBefore(b before) Reaction {
	// The open-line rule (ledger.LineHold): a record whose line is in a
	// live provider batch waits for its answer, whatever else holds; one
	// holding a paid answer applies it, and is neither ended by the checks
	// that bound waiting (age, snoozes, runs, calls) nor moved to a
	// fallback first. An unsent line is taken back by whatever the record
	// does instead (a synchronous call, a move, a dead letter).
	if b.Line == ledger.HoldLive {
		return Reaction{Kind: ReactPark, After: b.LineWait}
	}
	held := b.Line == ledger.HoldAnswered
	if b.ResultStored && !held {
		// Completed by another run: never dead-lettered as well.
		return Reaction{Kind: ReactComplete}
	}
	// A River attempt beyond max_attempts can only come from runs that made
	// no call (calls are counted by the ledger, below): the worker's own
	// errors. They end here, in the dead letters, rather than being discarded
	// by River with the record in neither the results nor the dead letters.
	switch {
	case held:
	case b.Attempt > b.MaxAttempts:
		return deadLetter(classify.Transient, ReasonWorkerErrors,
			fmt.Sprintf("run %d with max_attempts %d: earlier runs ended in worker or database errors", b.Attempt, b.MaxAttempts))
	case b.MaxAge > 0 && b.Age > b.MaxAge:
		return deadLetter(classify.Throttled, ReasonSnoozedOut,
			fmt.Sprintf("queued for %s, longer than the %s limit", b.Age.Round(time.Minute), b.MaxAge))
	case b.OwnSnoozes >= b.MaxSnoozes:
		return deadLetter(classify.Throttled, ReasonSnoozedOut,
			fmt.Sprintf("snoozed %d times by its own throttling (pipeline max_snoozes %d)", b.OwnSnoozes, b.MaxSnoozes))
	}
	if a := b.Admission; a != nil {
		if !a.Allowed && !held && b.Fallback.ready() {
			return fallback(b.Fallback.Model, Reaction{Kind: ReactPark, After: max(a.Wait, time.Second)})
		}
		if !a.Allowed && a.Breaker == keys.BreakerStorm {
			return Reaction{Kind: ReactPark, After: stormPark}
		}
		if !a.Allowed {
			return Reaction{Kind: ReactPark, After: max(a.Wait, time.Second)}
		}
		if !a.Probe && b.Pause != nil {
			return Reaction{Kind: ReactPark, After: max(*b.Pause, 100*time.Millisecond)}
		}
	}
	if p := b.Prior; p != nil {
		switch {
		case p.DeadLettered:
			return Reaction{Kind: ReactCancel}
		case p.JobLast.Seen && !p.JobLast.Unfinished && p.JobLast.Class == classify.Rejected:
			return changeLost()
		case p.OKAttemptID != 0 && p.ResultStored:
			// Stored by a run whose completion did not land: finish, don't call.
			return Reaction{Kind: ReactComplete}
		case held:
			// The answer is applied (batchline.go): the checks below bound
			// sends, and this one is paid for.
		case b.CacheHit:
			// Answered before, in this batch or another: an answer already
			// paid for beats another call, and beats giving up on a record
			// whose own calls got no answer.
			return Reaction{Kind: ReactCacheHit}
		case p.JobAmbiguous > 0 && b.Policy == config.AmbiguousLookup && !b.Lookup.Asked:
			// Before a resend, or giving up: the provider may have the answer.
			return Reaction{Kind: ReactLookup}
		case b.Lookup.Found && b.Lookup.Unusable != "":
			return deadLetter(classify.OK, ReasonInvalidOutput, "stored answer found by look-up: "+b.Lookup.Unusable)
		case b.Lookup.Found:
			return Reaction{Kind: ReactCompleteFound}
		case b.Lookup.Asked && b.Lookup.Waited < b.Lookup.Wait:
			// Not in the store yet: it lags behind the answer. Ask again.
			return Reaction{Kind: ReactPark, After: b.Lookup.Recheck}
		case p.JobAmbiguous > 0 && b.Policy == config.AmbiguousDeadLetter:
			// An earlier run's call got no answer (its run was stopped, or
			// it died): never resent on this key.
			return deadLetter(classify.Ambiguous, ReasonAmbiguousUnresolved,
				fmt.Sprintf("%d calls with no answer, possibly billed; key ambiguous policy dead_letter: not resent", p.JobAmbiguous))
		case p.JobAmbiguous > b.AmbiguousRetries:
			return deadLetter(classify.Ambiguous, ReasonAmbiguousExhausted,
				fmt.Sprintf("%d calls with no answer (pipeline ambiguous_retries %d)", p.JobAmbiguous, b.AmbiguousRetries))
		case p.JobCalls >= b.MaxAttempts:
			// Calls whose runs died before they could dead-letter (a crash
			// after the last send): never one more than max_attempts.
			return deadLetter(classify.Transient, ReasonRetriesExhausted,
				fmt.Sprintf("%d calls (max_attempts %d)", p.JobCalls, b.MaxAttempts))
		}
	}
	if !held { // a paid answer is applied (and billed) whatever the hold
		switch b.Hold {
		case ledger.BatchCancelled:
			return deadLetter(classify.Rejected, ledger.ReasonCancelled,
				"the batch was cancelled by hand (`triage batch cancel`) before this record had an outcome")
		case ledger.BatchPaused:
			// A person's doing, not the record's: no snooze charged; the
			// resume wakes the job.
			return Reaction{Kind: ReactPark, After: max(b.HoldRecheck, time.Second)}
		}
	}
	if b.OverRetryBudget {
		return Reaction{Kind: ReactPark, After: b.RetryDefer}
	}
	if b.DeadlineNear {
		return Reaction{Kind: ReactPark}
	}
	if e := b.Budget; e != nil {
		// A batch at its cap, or in-flight reservations filling it: either
		// way the fleet's doing, not the record's.
		return Reaction{Kind: ReactPark, After: b.BudgetRecheck}
	}
	return Reaction{Kind: ReactGo}
}

// after is what a run knows once its call returned.
type after struct {
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
	// Backoff is the jittered exponential backoff for this call's retry;
	// BackoffCap caps any wait a transient answer asks for.
	Backoff, BackoffCap time.Duration
	// Throttle is the wait after a throttle (the hint, or the adaptive
	// default); KeyWide says the whole key must wait, not only this job.
	Throttle time.Duration
	KeyWide  bool
	// ProbeInterval of the exhausted breaker.
	ProbeInterval time.Duration
	// Storm: what the storm breaker says after hearing this call.
	Storm keys.StormReport
	// Held: the safety net holds the key for this call's failure (a
	// rejection streak or a throttle wall it is part of): the record waits
	// for the key to resume instead of being dead-lettered or snoozed.
	Held bool
	// Change: what a rejection's one changed retry is decided from.
	Change changeFacts
	// Partial: what a stream cut midway delivered (PartialChars characters)
	// and the pipeline's accept_partial_min_chars (0: never accepted).
	PartialChars, AcceptPartialMinChars int
	// Fallback: the first capable fallback, for a job whose transient
	// attempts are spent (only Model is read).
	Fallback fallbackInput
}

// stopped: the run was stopped before an answer arrived.
func (a after) stopped() bool { return a.Cancelled && a.Phase != classify.PhaseResponse }

// decideAfter decides what a finished call leads to.
func decideAfter(a after) Reaction {
	if a.ClientErr != "" {
		r := deadLetter(classify.Rejected, ReasonConfig, a.ClientErr)
		r.Outcome = ledger.AttemptFailed
		return r
	}
	if a.stopped() {
		// Not answered: the call may have gone out. Keep it possibly billed
		// and come back without spending an attempt; the next send reuses
		// its idempotency key.
		r := Reaction{Kind: ReactPark, After: time.Second, Outcome: ledger.AttemptFailed}
		if a.Phase == classify.PhaseSentNoResponse || a.Phase == classify.PhaseStream {
			r.Outcome = ledger.AttemptPossiblyBilled
		}
		return r
	}
	v := a.Verdict
	if acceptPartial(a) {
		return Reaction{Kind: ReactCompletePartial, Outcome: ledger.AttemptPossiblyBilled}
	}
	calls := a.JobCalls + 1
	switch v.Class {
	case classify.OK:
		if a.Unusable != "" {
			r := deadLetter(classify.OK, ReasonInvalidOutput, a.Unusable)
			// A 2xx body that is not the vendor's format tells no usage: the
			// call may have been billed, so it stays possibly billed at its
			// estimate rather than being recorded as free.
			r.Outcome = ledger.AttemptOK
			if a.Malformed {
				r.Outcome = ledger.AttemptPossiblyBilled
			}
			return r
		}
		return Reaction{Kind: ReactComplete, Outcome: ledger.AttemptOK}

	case classify.Transient:
		var r Reaction
		switch {
		case (calls >= a.MaxAttempts || a.NoRetries) && a.Fallback.Model != nil:
			// Spent on this model: a capable fallback gets the record, with
			// attempts of its own. Refused by fallback_max_share, it is
			// dead-lettered as it would have been.
			r = fallback(a.Fallback.Model, deadLetter(classify.Transient, ReasonRetriesExhausted, fmt.Sprintf("%d attempts (max_attempts %d, key retry_budget %g); last: %s; fallback_max_share reached",
				calls, a.MaxAttempts, a.RetryBudget, v.Reason)))
			r.Fallback.Otherwise.Outcome = ledger.AttemptFailed
		case calls >= a.MaxAttempts || a.NoRetries:
			r = deadLetter(classify.Transient, ReasonRetriesExhausted, fmt.Sprintf("%d attempts (max_attempts %d, key retry_budget %g); last: %s",
				calls, a.MaxAttempts, a.RetryBudget, v.Reason))
		case a.Storm.Open:
			r = Reaction{Kind: ReactStorm, After: min(a.Storm.Wait, stormPark)}
		default:
			r = Reaction{Kind: ReactRetry, After: transientWait(a.Backoff, retryAfter(v), a.BackoffCap)}
		}
		r.Outcome = ledger.AttemptFailed
		return r

	case classify.Throttled:
		if a.Held {
			return Reaction{Kind: ReactTrip, After: a.ProbeInterval, Outcome: ledger.AttemptFailed}
		}
		r := throttled(a.Throttle, a.KeyWide)
		r.Outcome = ledger.AttemptFailed
		return r

	case classify.Exhausted:
		return Reaction{Kind: ReactTrip, After: a.ProbeInterval, Outcome: ledger.AttemptFailed}

	case classify.Ambiguous:
		var r Reaction
		switch {
		case a.Policy == config.AmbiguousDeadLetter:
			r = deadLetter(classify.Ambiguous, ReasonAmbiguousUnresolved,
				fmt.Sprintf("no answer, possibly billed; key ambiguous policy dead_letter: not resent; last: %s", v.Reason))
		case a.Policy == config.AmbiguousLookup:
			// The next run looks the call up before anything else (and
			// gives up there, once lookup_wait passed, if the sends are
			// used up): the store may have this very send's answer.
			r = Reaction{Kind: ReactRetry, After: a.Backoff}
		case a.JobAmbiguous+1 > a.AmbiguousRetries || calls >= a.MaxAttempts:
			r = deadLetter(classify.Ambiguous, ReasonAmbiguousExhausted,
				fmt.Sprintf("no answer after %d sends with the same idempotency key; last: %s", a.JobAmbiguous+1, v.Reason))
		default:
			r = Reaction{Kind: ReactRetry, After: a.Backoff}
		}
		r.Outcome = ledger.AttemptPossiblyBilled
		return r

	default: // Rejected
		if a.Held {
			return Reaction{Kind: ReactTrip, After: a.ProbeInterval, Outcome: ledger.AttemptFailed}
		}
		r, ok := changedRetry(a)
		if !ok {
			r = deadLetter(classify.Rejected, v.Reason, rejectedDetail(a))
		}
		r.Outcome = ledger.AttemptFailed
		return r
	}
}

// stormPark is how long a job parks while the storm breaker is open,
// whatever the cooldown: the key's queue is paused, so the job only waits
// there, available, and is fetched the moment a probe closes the breaker.
// A long snooze could outlast that moment (River records a snooze after the
// run returns, possibly after the closing probe woke the parked jobs).
const stormPark = time.Second

// throttled is the reaction to a throttle: the whole key waits when the
// provider says so (keyWide), else only the job that was told. Today every
// throttle is key-wide (see Runtime's use); pacing decides keyWide.
func throttled(wait time.Duration, keyWide bool) Reaction {
	if keyWide {
		return Reaction{Kind: ReactPauseKey, After: wait}
	}
	return Reaction{Kind: ReactSnooze, After: wait}
}

// transientWait is a transient failure's retry wait: the backoff, or longer
// when the answer asked for longer, but never more than limit (the
// backoff cap, 5 min): a 503 with retry-after: 86400 must not park a
// record for a day.
func transientWait(backoff, hint, limit time.Duration) time.Duration {
	return min(max(backoff, hint), max(limit, backoff))
}

// breakerOutcome is what a finished call tells the key's breakers.
func breakerOutcome(a after) keys.Outcome {
	if a.ClientErr != "" || a.stopped() {
		return keys.OutcomeNone
	}
	return keys.OutcomeOf(a.Verdict.Class)
}
