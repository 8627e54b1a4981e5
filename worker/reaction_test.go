package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
)

func ptr[T any](v T) *T { return &v }

// job is a fresh job of a pipeline with max_attempts 6, ambiguous_retries 1,
// max_snoozes 100.
func job() before {
	return before{Attempt: 1, MaxAttempts: 6, AmbiguousRetries: 1, Age: time.Minute, MaxAge: 24 * time.Hour, MaxSnoozes: 100}
}

func TestDecideBefore(t *testing.T) {
	t.Parallel()
	allowed := &keys.Admission{Allowed: true, State: keys.StateClosed}
	with := func(f func(b *before)) before {
		b := job()
		f(&b)
		return b
	}
	tests := []struct {
		name string
		in   before
		want Reaction
	}{
		{"fresh job goes on", job(), Reaction{Kind: ReactGo}},
		{"batch paused by hand: park, no snooze charged", with(func(b *before) {
			b.Admission, b.Prior, b.Hold, b.HoldRecheck = allowed, &ledger.Prior{}, ledger.BatchPaused, 30*time.Second
		}), Reaction{Kind: ReactPark, After: 30 * time.Second}},
		{"batch cancelled by hand: dead letter cancelled, no call", with(func(b *before) {
			b.Admission, b.Prior, b.Hold = allowed, &ledger.Prior{}, ledger.BatchCancelled
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Rejected, Reason: ledger.ReasonCancelled}},
		{"cancelled, but the line's answer is on its way: wait for it", with(func(b *before) {
			b.Admission, b.Prior, b.Hold, b.Line, b.LineWait = allowed, &ledger.Prior{}, ledger.BatchCancelled, ledger.HoldLive, time.Minute
		}), Reaction{Kind: ReactPark, After: time.Minute}},
		{"cancelled, and the line's answer is in: go on and apply it", with(func(b *before) {
			b.Admission, b.Prior, b.Hold, b.Line = allowed, &ledger.Prior{}, ledger.BatchCancelled, ledger.HoldAnswered
		}), Reaction{Kind: ReactGo}},
		{"paused, but the line's answer is in: go on and apply it", with(func(b *before) {
			b.Admission, b.Prior, b.Hold, b.Line = allowed, &ledger.Prior{}, ledger.BatchPaused, ledger.HoldAnswered
		}), Reaction{Kind: ReactGo}},
		{"cancelled after an answer was stored: complete, not dead letter", with(func(b *before) {
			b.Admission, b.Hold = allowed, ledger.BatchCancelled
			b.Prior = &ledger.Prior{OKAttemptID: 7, ResultStored: true}
		}), Reaction{Kind: ReactComplete}},
		{"worker errors used up the runs", with(func(b *before) { b.Attempt = 7 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Transient, Reason: ReasonWorkerErrors}},
		{"runs within max_attempts go on", with(func(b *before) { b.Attempt = 6 }), Reaction{Kind: ReactGo}},
		{"too old", with(func(b *before) { b.Age = 25 * time.Hour }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Throttled, Reason: ReasonSnoozedOut}},
		{"too old, but another run of the job stored its result: complete", with(func(b *before) {
			b.Age, b.ResultStored = 25*time.Hour, true
		}), Reaction{Kind: ReactComplete}},
		{"own snoozes used up", with(func(b *before) { b.OwnSnoozes = 100 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Throttled, Reason: ReasonSnoozedOut}},
		{"breaker refuses: park until the probe", with(func(b *before) {
			b.Admission = &keys.Admission{Wait: 30 * time.Second, State: keys.StateOpen}
		}), Reaction{Kind: ReactPark, After: 30 * time.Second}},
		{"storm breaker refuses: park in the paused queue", with(func(b *before) {
			b.Admission = &keys.Admission{Breaker: keys.BreakerStorm, Wait: time.Minute, State: keys.StateOpen}
		}), Reaction{Kind: ReactPark, After: stormPark}},
		{"breaker refuses with a short wait: park a second", with(func(b *before) {
			b.Admission = &keys.Admission{Wait: time.Millisecond, State: keys.StateHalfOpen}
		}), Reaction{Kind: ReactPark, After: time.Second}},
		{"paused key: park until the pause ends", with(func(b *before) {
			b.Admission, b.Pause = allowed, ptr(5*time.Second)
		}), Reaction{Kind: ReactPark, After: 5 * time.Second}},
		{"the probe goes through a pause", with(func(b *before) {
			b.Admission, b.Pause = &keys.Admission{Allowed: true, Probe: true}, ptr(5*time.Second)
		}), Reaction{Kind: ReactGo}},
		{"already dead-lettered: cancel", with(func(b *before) {
			b.Admission, b.Prior = allowed, &ledger.Prior{DeadLettered: true}
		}), Reaction{Kind: ReactCancel}},
		{"stored by an earlier run: complete without calling", with(func(b *before) {
			b.Admission, b.Prior = allowed, &ledger.Prior{OKAttemptID: 3, ResultStored: true}
		}), Reaction{Kind: ReactComplete}},
		{"ok without result: call again", with(func(b *before) {
			b.Admission, b.Prior = allowed, &ledger.Prior{OKAttemptID: 3}
		}), Reaction{Kind: ReactGo}},
		{"ambiguous sends used up", with(func(b *before) {
			b.Admission, b.Prior = allowed, &ledger.Prior{JobAmbiguous: 2}
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousExhausted}},
		{"dead_letter policy: an unanswered call is never resent", with(func(b *before) {
			b.Admission, b.Prior, b.Policy = allowed, &ledger.Prior{JobAmbiguous: 1, JobCalls: 1}, config.AmbiguousDeadLetter
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousUnresolved}},
		{"retry policy: an unanswered call is resent", with(func(b *before) {
			b.Admission, b.Prior, b.Policy = allowed, &ledger.Prior{JobAmbiguous: 1, JobCalls: 1}, config.AmbiguousRetry
		}), Reaction{Kind: ReactGo}},
		{"dead_letter policy: an answered record still completes", with(func(b *before) {
			b.Admission, b.Prior, b.Policy = allowed, &ledger.Prior{JobAmbiguous: 1, OKAttemptID: 3, ResultStored: true}, config.AmbiguousDeadLetter
		}), Reaction{Kind: ReactComplete}},
		{"lookup policy: a lost call is looked up before anything else", with(func(b *before) {
			b.Admission, b.Prior, b.Policy = allowed, &ledger.Prior{JobAmbiguous: 2, JobCalls: 2}, config.AmbiguousLookup
		}), Reaction{Kind: ReactLookup}},
		{"lookup policy: found: complete with the stored answer", with(func(b *before) {
			b.Admission, b.Prior, b.Policy = allowed, &ledger.Prior{JobAmbiguous: 2, JobCalls: 2}, config.AmbiguousLookup
			b.Lookup = lookupFacts{Asked: true, Found: true}
		}), Reaction{Kind: ReactCompleteFound}},
		{"lookup policy: found but unusable: invalid_output", with(func(b *before) {
			b.Admission, b.Prior, b.Policy = allowed, &ledger.Prior{JobAmbiguous: 1, JobCalls: 1}, config.AmbiguousLookup
			b.Lookup = lookupFacts{Asked: true, Found: true, Unusable: "not JSON"}
		}), Reaction{Kind: ReactDeadLetter, Class: classify.OK, Reason: ReasonInvalidOutput}},
		{"lookup policy: not found within lookup_wait: park and ask again", with(func(b *before) {
			b.Admission, b.Prior, b.Policy = allowed, &ledger.Prior{JobAmbiguous: 1, JobCalls: 1}, config.AmbiguousLookup
			b.Lookup = lookupFacts{Asked: true, Waited: time.Second, Wait: 30 * time.Second, Recheck: 2 * time.Second}
		}), Reaction{Kind: ReactPark, After: 2 * time.Second}},
		{"lookup policy: not found after lookup_wait: taken as not run, resent", with(func(b *before) {
			b.Admission, b.Prior, b.Policy = allowed, &ledger.Prior{JobAmbiguous: 1, JobCalls: 1}, config.AmbiguousLookup
			b.Lookup = lookupFacts{Asked: true, Waited: 30 * time.Second, Wait: 30 * time.Second}
		}), Reaction{Kind: ReactGo}},
		{"lookup policy: not found after lookup_wait, ambiguous sends used up: dead letter", with(func(b *before) {
			b.Admission, b.Prior, b.Policy = allowed, &ledger.Prior{JobAmbiguous: 2, JobCalls: 2}, config.AmbiguousLookup
			b.Lookup = lookupFacts{Asked: true, Waited: 30 * time.Second, Wait: 30 * time.Second}
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousExhausted}},
		{"lookup policy: nothing lost: no look-up", with(func(b *before) {
			b.Admission, b.Prior, b.Policy = allowed, &ledger.Prior{JobCalls: 1}, config.AmbiguousLookup
		}), Reaction{Kind: ReactGo}},
		{"calls used up by crashed runs", with(func(b *before) {
			b.Admission, b.Prior = allowed, &ledger.Prior{JobCalls: 6}
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Transient, Reason: ReasonRetriesExhausted}},
		{"five calls: one more may go", with(func(b *before) {
			b.Admission, b.Prior = allowed, &ledger.Prior{JobCalls: 5}
		}), Reaction{Kind: ReactGo}},
		{"retry over the fleet budget: park", with(func(b *before) {
			b.Admission, b.Prior, b.OverRetryBudget, b.RetryDefer = allowed, &ledger.Prior{}, true, 2*time.Second
		}), Reaction{Kind: ReactPark, After: 2 * time.Second}},
		{"the waits left too little of the deadline for the call: park", with(func(b *before) {
			b.Admission, b.Prior, b.DeadlineNear = allowed, &ledger.Prior{}, true
		}), Reaction{Kind: ReactPark}},
		{"spend cap: park for the recheck", with(func(b *before) {
			b.Admission, b.Prior, b.Budget, b.BudgetRecheck = allowed, &ledger.Prior{}, &ledger.BudgetError{Paused: true}, 30*time.Second
		}), Reaction{Kind: ReactPark, After: 30 * time.Second}},
		{"everything known and fine: go", with(func(b *before) {
			b.Admission, b.Prior = allowed, &ledger.Prior{JobCalls: 2, JobAmbiguous: 1}
		}), Reaction{Kind: ReactGo}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := decideBefore(tt.in)
			got.Detail = ""
			require.Equal(t, tt.want, got)
		})
	}
}

func TestDecideAfter(t *testing.T) {
	t.Parallel()
	verdict := func(c classify.Class, retryAfterS ...float64) classify.Verdict {
		v := classify.Verdict{Class: c, Reason: "r", Known: true}
		if len(retryAfterS) > 0 {
			v.RetryAfterS = &retryAfterS[0]
		}
		return v
	}
	call := func(v classify.Verdict, f ...func(a *after)) after {
		a := after{Verdict: v, Phase: classify.PhaseResponse, MaxAttempts: 6, AmbiguousRetries: 1, RetryBudget: 0.2,
			Backoff: 4 * time.Second, BackoffCap: 5 * time.Minute, Throttle: 20 * time.Second, KeyWide: true,
			ProbeInterval: time.Minute}
		for _, fn := range f {
			fn(&a)
		}
		return a
	}
	storm := func(a *after) { a.Storm = keys.StormReport{Open: true, Wait: 8 * time.Second} }
	shortStorm := func(a *after) { a.Storm = keys.StormReport{Open: true, Wait: 300 * time.Millisecond} }
	tests := []struct {
		name    string
		in      after
		want    Reaction
		breaker keys.Outcome
	}{
		{"ok completes", call(verdict(classify.OK)),
			Reaction{Kind: ReactComplete, Outcome: ledger.AttemptOK}, keys.OutcomeSuccess},
		{"rejected while the safety net holds the key for it: parks until the probe", call(verdict(classify.Rejected), func(a *after) { a.Held = true }),
			Reaction{Kind: ReactTrip, After: time.Minute, Outcome: ledger.AttemptFailed}, keys.OutcomeRejected},
		{"throttled while the safety net holds the key for it: parks, not its own snooze", call(verdict(classify.Throttled), func(a *after) { a.Held = true }),
			Reaction{Kind: ReactTrip, After: time.Minute, Outcome: ledger.AttemptFailed}, keys.OutcomeExcluded},
		{"ok but not json: invalid output, billed", call(verdict(classify.OK), func(a *after) { a.Unusable = "not json" }),
			Reaction{Kind: ReactDeadLetter, Class: classify.OK, Reason: ReasonInvalidOutput, Outcome: ledger.AttemptOK}, keys.OutcomeSuccess},
		{"garbage 2xx: invalid output, possibly billed", call(verdict(classify.OK), func(a *after) { a.Unusable, a.Malformed = "garbage", true }),
			Reaction{Kind: ReactDeadLetter, Class: classify.OK, Reason: ReasonInvalidOutput, Outcome: ledger.AttemptPossiblyBilled}, keys.OutcomeSuccess},
		{"transient retries after the backoff", call(verdict(classify.Transient)),
			Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: ledger.AttemptFailed}, keys.OutcomeFailure},
		{"transient with a longer hint waits for it", call(verdict(classify.Transient, 30)),
			Reaction{Kind: ReactRetry, After: 30 * time.Second, Outcome: ledger.AttemptFailed}, keys.OutcomeFailure},
		{"transient with retry-after a day waits the 5 min cap", call(verdict(classify.Transient, 86400)),
			Reaction{Kind: ReactRetry, After: 5 * time.Minute, Outcome: ledger.AttemptFailed}, keys.OutcomeFailure},
		{"transient on the last call: retries exhausted", call(verdict(classify.Transient), func(a *after) { a.JobCalls = 5 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Transient, Reason: ReasonRetriesExhausted, Outcome: ledger.AttemptFailed}, keys.OutcomeFailure},
		{"transient with retry_budget 0: no retry", call(verdict(classify.Transient), func(a *after) { a.NoRetries, a.RetryBudget = true, 0 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Transient, Reason: ReasonRetriesExhausted, Outcome: ledger.AttemptFailed}, keys.OutcomeFailure},
		{"transient in a storm parks in the paused queue", call(verdict(classify.Transient), storm),
			Reaction{Kind: ReactStorm, After: stormPark, Outcome: ledger.AttemptFailed}, keys.OutcomeFailure},
		{"transient in a storm with the probe due sooner", call(verdict(classify.Transient), shortStorm),
			Reaction{Kind: ReactStorm, After: 300 * time.Millisecond, Outcome: ledger.AttemptFailed}, keys.OutcomeFailure},
		{"a storm does not save the last call", call(verdict(classify.Transient), storm, func(a *after) { a.JobCalls = 5 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Transient, Reason: ReasonRetriesExhausted, Outcome: ledger.AttemptFailed}, keys.OutcomeFailure},
		{"throttled pauses the key", call(verdict(classify.Throttled, 20)),
			Reaction{Kind: ReactPauseKey, After: 20 * time.Second, Outcome: ledger.AttemptFailed}, keys.OutcomeExcluded},
		{"throttled for this job only snoozes it", call(verdict(classify.Throttled, 20), func(a *after) { a.KeyWide = false }),
			Reaction{Kind: ReactSnooze, After: 20 * time.Second, Outcome: ledger.AttemptFailed}, keys.OutcomeExcluded},
		{"throttled in a storm is still a throttle", call(verdict(classify.Throttled, 20), storm),
			Reaction{Kind: ReactPauseKey, After: 20 * time.Second, Outcome: ledger.AttemptFailed}, keys.OutcomeExcluded},
		{"exhausted trips and parks for the probe", call(verdict(classify.Exhausted)),
			Reaction{Kind: ReactTrip, After: time.Minute, Outcome: ledger.AttemptFailed}, keys.OutcomeExhausted},
		{"ambiguous retries with the same key", call(verdict(classify.Ambiguous)),
			Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: ledger.AttemptPossiblyBilled}, keys.OutcomeExcluded},
		{"second ambiguous: dead letter", call(verdict(classify.Ambiguous), func(a *after) { a.JobAmbiguous = 1 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousExhausted, Outcome: ledger.AttemptPossiblyBilled}, keys.OutcomeExcluded},
		{"dead_letter policy: the first ambiguous call is dead-lettered", call(verdict(classify.Ambiguous), func(a *after) { a.Policy = config.AmbiguousDeadLetter }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousUnresolved, Outcome: ledger.AttemptPossiblyBilled}, keys.OutcomeExcluded},
		{"lookup policy: even the last ambiguous send is looked up first", call(verdict(classify.Ambiguous), func(a *after) {
			a.JobAmbiguous, a.Policy = 1, config.AmbiguousLookup
		}), Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: ledger.AttemptPossiblyBilled}, keys.OutcomeExcluded},
		{"ambiguous on the last call: dead letter", call(verdict(classify.Ambiguous), func(a *after) { a.JobCalls, a.AmbiguousRetries = 5, 3 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousExhausted, Outcome: ledger.AttemptPossiblyBilled}, keys.OutcomeExcluded},
		{"rejected: dead letter with the classifier's reason", call(classify.Verdict{Class: classify.Rejected, Reason: "context_length"}),
			Reaction{Kind: ReactDeadLetter, Class: classify.Rejected, Reason: "context_length", Outcome: ledger.AttemptFailed}, keys.OutcomeRejected},
		{"client refused the request: config dead letter", call(classify.Verdict{}, func(a *after) { a.ClientErr = "bad" }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Rejected, Reason: ReasonConfig, Outcome: ledger.AttemptFailed}, keys.OutcomeNone},
		{"stopped before sending: park, not billed", call(classify.Verdict{}, func(a *after) { a.Cancelled, a.Phase = true, classify.PhaseNotSent }),
			Reaction{Kind: ReactPark, After: time.Second, Outcome: ledger.AttemptFailed}, keys.OutcomeNone},
		{"stopped after sending: park, possibly billed", call(classify.Verdict{}, func(a *after) { a.Cancelled, a.Phase = true, classify.PhaseSentNoResponse }),
			Reaction{Kind: ReactPark, After: time.Second, Outcome: ledger.AttemptPossiblyBilled}, keys.OutcomeNone},
		{"stopped, but the answer had arrived: it is stored", call(verdict(classify.OK), func(a *after) { a.Cancelled, a.Phase = true, classify.PhaseResponse }),
			Reaction{Kind: ReactComplete, Outcome: ledger.AttemptOK}, keys.OutcomeSuccess},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := decideAfter(tt.in)
			got.Detail = ""
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.breaker, breakerOutcome(tt.in))
		})
	}
}

func TestTransientWait(t *testing.T) {
	t.Parallel()
	require.Equal(t, 4*time.Second, transientWait(4*time.Second, 0, 5*time.Minute))
	require.Equal(t, 5*time.Minute, transientWait(time.Second, 24*time.Hour, 5*time.Minute))
	// A backoff above the cap (a test's tiny cap) is never cut below itself.
	require.Equal(t, time.Second, transientWait(time.Second, time.Hour, time.Millisecond))
}
