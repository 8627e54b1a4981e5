package decide

import (
	"fmt"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/worker/config"
)

// BeforeCall is what a run knows before its call, step by step: fields of
// steps not reached yet are nil (or zero).
type BeforeCall struct {
	// The job and its pipeline.
	Attempt          int // River's attempt: 1 + runs that ended in the worker's own errors
	MaxAttempts      int
	AmbiguousRetries int
	// Policy is the key's ambiguous policy ("" reads as retry).
	Policy      config.Ambiguous
	Age, MaxAge time.Duration
	OwnSnoozes  int
	MaxSnoozes  int
	// Admission is the breakers' answer; nil before admission. Pause is
	// the time left on the key's active pause (nil: none).
	Admission *Admission
	Pause     *time.Duration
	// Prior is what the ledger knows about earlier sends; nil before the
	// look-up.
	Prior *Prior
	// CacheHit: the response cache holds an unexpired answer to this
	// request (read with Prior; only for a pipeline with cache = true and a
	// job without NoCache).
	CacheHit bool
	// OverRetryBudget: this send is a retry and the key's fleet-wide retry
	// budget is spent (RetryBudget.Spent).
	OverRetryBudget bool
	RetryDefer      time.Duration // jittered wait of a deferred retry
	// OverBudget: the batch's spend cap refused the intent (at the cap, or
	// reservations in flight filling it); false when it was accepted (or
	// not asked yet).
	OverBudget    bool
	BudgetRecheck time.Duration // jittered
	// DeadlineNear: the waits before the call (for a concurrency slot, for
	// the pace) left too little of the run's deadline for it (DeadlineNear).
	DeadlineNear bool
	// Fallback: where the job could go while its key's breaker is open.
	Fallback FallbackFacts
	// Line is what the job's open provider-batch line allows (LineNone
	// before it is read, or without one); LineWait how long a job waiting
	// for its line's answer sleeps (the submitter wakes it sooner).
	Line     Line
	LineWait time.Duration
	// ResultStored: the record has a result already (a run of a job whose
	// record another run of it completed: River's rescuer re-ran it), read
	// before a check that ends the record without reading the ledger.
	ResultStored bool
	// Hold is the batch's state when paused or cancelled by hand, HoldNone
	// otherwise; read with Prior, or from the intent's refusal.
	Hold        Hold
	HoldRecheck time.Duration // how long a paused batch's job parks
	// Lookup is what the provider's store said about the job's unanswered
	// calls (policy lookup); zero before it was asked.
	Lookup Lookup
}

// Admission is what the key's breakers answered (keys.Admission).
type Admission struct {
	// Allowed: the call may go. Probe: it is the breaker's one probe, which
	// goes through a pause.
	Allowed, Probe bool
	// Wait is how long until the breaker's next probe, when refused.
	Wait time.Duration
	// Storm: the refusal is the storm breaker's (the key's queue is paused).
	Storm bool
}

// Prior is what the ledger knows about the job's earlier sends under its
// idempotency key (ledger.Prior).
type Prior struct {
	// OKAttemptID: an attempt that finished ok (0: none); ResultStored: a
	// result row references it.
	OKAttemptID  int64
	ResultStored bool
	// JobAmbiguous: the job's sends that got no answer (possibly billed,
	// or an intent whose worker died).
	JobAmbiguous int
	// JobLast is what the job's latest attempt came to.
	JobLast LastAttempt
	// JobCalls: the job's calls that spend one of max_attempts.
	JobCalls int
	// DeadLettered: the record has a dead letter not requeued.
	DeadLettered bool
	// PendingResponse: a lost send left a background response running,
	// its id stored: the next send polls it, it does not send again.
	PendingResponse bool
}

// LastAttempt is what a job's latest attempt came to (ledger.LastAttempt).
type LastAttempt struct {
	// Seen: the job has an attempt under the key. Unfinished: that attempt
	// is still an intent (its worker died mid-call).
	Seen, Unfinished bool
	// Class is its verdict's class when it finished.
	Class classify.Class
}

// Line is what a job's open provider-batch line allows (ledger.LineHold).
type Line int

const (
	// LineNone: no open line, or one that holds nothing.
	LineNone Line = iota
	// LineUnsent: a line not in a provider batch yet: the record may go
	// another way; the line is taken back.
	LineUnsent
	// LineLive: the line is in a live provider batch: the record waits
	// for its answer.
	LineLive
	// LineAnswered: the line holds a paid answer not applied yet: the
	// record applies it.
	LineAnswered
)

// Hold is a batch held by hand (ledger.BatchPaused, ledger.BatchCancelled).
type Hold int

const (
	// HoldNone: the batch is not held by hand.
	HoldNone Hold = iota
	// HoldPaused: `triage batch pause`: its jobs park until the resume.
	HoldPaused
	// HoldCancelled: `triage batch cancel`: its records without an outcome
	// are dead-lettered.
	HoldCancelled
)

// Lookup is what a look-up of a lost call found.
type Lookup struct {
	// Asked: the store was asked in this run. Found: it had the call.
	// Unusable: why the stored answer breaks the output contract.
	Asked, Found bool
	Unusable     string
	// Waited is how long the job has been looking for its current lost
	// call; Wait the key's lookup_wait; Recheck how long it parks before
	// asking again.
	Waited, Wait, Recheck time.Duration
}

// BreakerPark is how long a job parks while a breaker of its key (storm or
// exhausted) is not closed, whatever the cooldown, the probe time or the
// probe's lease: the key's queue is paused, so the job only waits there,
// available, and is fetched the moment the breaker closes (a probe, `triage
// keys resume`). A long snooze could outlast that moment: River records a
// snooze after the run returns, possibly after the close woke the parked
// jobs, and the probe's lease is minutes. It also keeps the park within the
// job's max age, whatever a skewed clock makes of the probe time.
const BreakerPark = time.Second

// UnsentLineWait is how long a job sleeps on a line not sent yet (pending,
// or not run and written again): the line wait, but no longer than the job
// may still wait in all (MaxAge). An unsent line bills nothing and holds
// nothing, so a line no provider batch takes (a key exhausted for good)
// must not keep its record past MaxAge: the job wakes just after it, and
// Before dead-letters it (snoozed_out), taking the line back.
func (b BeforeCall) UnsentLineWait() time.Duration {
	if b.MaxAge <= 0 {
		return b.LineWait
	}
	return max(min(b.LineWait, b.MaxAge-b.Age+time.Second), time.Second)
}

// Before decides, from what a run knows so far, whether it ends before its
// call. ReactGo means: go on. The checks run in the order of the steps, so
// calling it again after a step is harmless.
func Before(b BeforeCall) Reaction {
	// The open-line rule (ledger.LineHold): a record whose line is in a
	// live provider batch waits for its answer, whatever else holds; one
	// holding a paid answer applies it, and is neither ended by the checks
	// that bound waiting (age, snoozes, runs, calls) nor moved to a
	// fallback first. An unsent line is taken back by whatever the record
	// does instead (a synchronous call, a move, a dead letter).
	if b.Line == LineLive {
		return Reaction{Kind: ReactPark, After: b.LineWait}
	}
	held := b.Line == LineAnswered
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
		return DeadLetter(classify.Transient, ReasonWorkerErrors,
			fmt.Sprintf("run %d with max_attempts %d: earlier runs ended in worker or database errors", b.Attempt, b.MaxAttempts))
	case b.MaxAge > 0 && b.Age > b.MaxAge:
		return DeadLetter(classify.Throttled, ReasonSnoozedOut,
			fmt.Sprintf("queued for %s, longer than the %s limit", b.Age.Round(time.Minute), b.MaxAge))
	case b.OwnSnoozes >= b.MaxSnoozes:
		return DeadLetter(classify.Throttled, ReasonSnoozedOut,
			fmt.Sprintf("snoozed %d times by its own throttling (pipeline max_snoozes %d)", b.OwnSnoozes, b.MaxSnoozes))
	}
	if a := b.Admission; a != nil {
		// Refused by a breaker (open, or its probe out): park in the key's
		// paused queue (BreakerPark), not until the probe time or the
		// probe's lease.
		if !a.Allowed && !held && b.Fallback.ready() {
			return fallback(b.Fallback.Model, Reaction{Kind: ReactPark, After: BreakerPark})
		}
		// A paid answer is applied whatever the breakers say: applying it
		// sends nothing.
		if !a.Allowed && !held {
			return Reaction{Kind: ReactPark, After: BreakerPark}
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
			return ChangeLost()
		case p.OKAttemptID != 0 && p.ResultStored:
			// Stored by a run whose completion did not land: finish, don't call.
			return Reaction{Kind: ReactComplete}
		case held:
			// The answer is applied (the worker's batch line): the checks
			// below bound sends, and this one is paid for.
		case b.CacheHit:
			// Answered before, in this batch or another: an answer already
			// paid for beats another call, and beats giving up on a record
			// whose own calls got no answer.
			return Reaction{Kind: ReactCacheHit}
		case p.JobAmbiguous > 0 && b.Policy == config.AmbiguousLookup && !b.Lookup.Asked:
			// Before a resend, or giving up: the provider may have the answer.
			return Reaction{Kind: ReactLookup}
		case b.Lookup.Found && b.Lookup.Unusable != "":
			return DeadLetter(classify.OK, ReasonInvalidOutput, "stored answer found by look-up: "+b.Lookup.Unusable)
		case b.Lookup.Found:
			return Reaction{Kind: ReactCompleteFound}
		case b.Lookup.Asked && b.Lookup.Waited < b.Lookup.Wait:
			// Not in the store yet: it lags behind the answer. Ask again.
			return Reaction{Kind: ReactPark, After: b.Lookup.Recheck}
		case p.PendingResponse:
			// The lost answer is a background response still at the
			// provider, its id stored: polling it is no resend, so neither
			// the dead_letter policy nor ambiguous_retries stops it.
		case p.JobAmbiguous > 0 && b.Policy == config.AmbiguousDeadLetter:
			// An earlier run's call got no answer (its run was stopped, or
			// it died): never resent on this key.
			return DeadLetter(classify.Ambiguous, ReasonAmbiguousUnresolved,
				fmt.Sprintf("%d calls with no answer, possibly billed; key ambiguous policy dead_letter: not resent", p.JobAmbiguous))
		case p.JobAmbiguous > b.AmbiguousRetries:
			return DeadLetter(classify.Ambiguous, ReasonAmbiguousExhausted,
				fmt.Sprintf("%d calls with no answer (pipeline ambiguous_retries %d)", p.JobAmbiguous, b.AmbiguousRetries))
		case p.JobCalls >= b.MaxAttempts:
			// Calls whose runs died before they could dead-letter (a crash
			// after the last send): never one more than max_attempts.
			return DeadLetter(classify.Transient, ReasonRetriesExhausted,
				fmt.Sprintf("%d calls (max_attempts %d)", p.JobCalls, b.MaxAttempts))
		}
	}
	if !held { // a paid answer is applied (and billed) whatever the hold
		switch b.Hold {
		case HoldCancelled:
			return DeadLetter(classify.Rejected, ReasonCancelled,
				"the batch was cancelled by hand (`triage batch cancel`) before this record had an outcome")
		case HoldPaused:
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
	if b.OverBudget {
		// A batch at its cap, or in-flight reservations filling it: either
		// way the fleet's doing, not the record's.
		return Reaction{Kind: ReactPark, After: b.BudgetRecheck}
	}
	return Reaction{Kind: ReactGo}
}
