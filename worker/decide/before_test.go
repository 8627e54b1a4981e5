package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/worker/config"
)

func ptr[T any](v T) *T { return &v }

// job is a fresh job of a pipeline with max_attempts 6, ambiguous_retries 1,
// max_snoozes 100.
func job() BeforeCall {
	return BeforeCall{Attempt: 1, MaxAttempts: 6, AmbiguousRetries: 1, Age: time.Minute, MaxAge: 24 * time.Hour, MaxSnoozes: 100}
}

func TestDecideBefore(t *testing.T) {
	t.Parallel()
	allowed := &Admission{Allowed: true}
	with := func(f func(b *BeforeCall)) BeforeCall {
		b := job()
		f(&b)
		return b
	}
	tests := []struct {
		name string
		in   BeforeCall
		want Reaction
	}{
		{"fresh job goes on", job(), Reaction{Kind: ReactGo}},
		{"batch paused by hand: park, no snooze charged", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Hold, b.HoldRecheck = allowed, &Prior{}, HoldPaused, 30*time.Second
		}), Reaction{Kind: ReactPark, After: 30 * time.Second}},
		{"batch cancelled by hand: dead letter cancelled, no call", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Hold = allowed, &Prior{}, HoldCancelled
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Rejected, Reason: ReasonCancelled}},
		{"cancelled, but the line's answer is on its way: wait for it", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Hold, b.Line, b.LineWait = allowed, &Prior{}, HoldCancelled, LineLive, time.Minute
		}), Reaction{Kind: ReactPark, After: time.Minute}},
		{"cancelled, and the line's answer is in: go on and apply it", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Hold, b.Line = allowed, &Prior{}, HoldCancelled, LineAnswered
		}), Reaction{Kind: ReactGo}},
		{"paused, but the line's answer is in: go on and apply it", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Hold, b.Line = allowed, &Prior{}, HoldPaused, LineAnswered
		}), Reaction{Kind: ReactGo}},
		{"cancelled after an answer was stored: complete, not dead letter", with(func(b *BeforeCall) {
			b.Admission, b.Hold = allowed, HoldCancelled
			b.Prior = &Prior{OKAttemptID: 7, ResultStored: true}
		}), Reaction{Kind: ReactComplete}},
		{"worker errors used up the runs", with(func(b *BeforeCall) { b.Attempt = 7 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Transient, Reason: ReasonWorkerErrors}},
		{"runs within max_attempts go on", with(func(b *BeforeCall) { b.Attempt = 6 }), Reaction{Kind: ReactGo}},
		{"too old", with(func(b *BeforeCall) { b.Age = 25 * time.Hour }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Throttled, Reason: ReasonSnoozedOut}},
		{"too old, but another run of the job stored its result: complete", with(func(b *BeforeCall) {
			b.Age, b.ResultStored = 25*time.Hour, true
		}), Reaction{Kind: ReactComplete}},
		{"own snoozes used up", with(func(b *BeforeCall) { b.OwnSnoozes = 100 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Throttled, Reason: ReasonSnoozedOut}},
		{"breaker refuses: park in the paused queue, not until the probe", with(func(b *BeforeCall) {
			b.Admission = &Admission{Wait: 30 * time.Second}
		}), Reaction{Kind: ReactPark, After: BreakerPark}},
		{"another job's probe is out: park in the paused queue, not for its lease", with(func(b *BeforeCall) {
			b.Admission = &Admission{Wait: 3 * time.Minute}
		}), Reaction{Kind: ReactPark, After: BreakerPark}},
		{"storm breaker refuses: park in the paused queue", with(func(b *BeforeCall) {
			b.Admission = &Admission{Storm: true, Wait: time.Minute}
		}), Reaction{Kind: ReactPark, After: BreakerPark}},
		{"breaker refuses with a short wait: park a second", with(func(b *BeforeCall) {
			b.Admission = &Admission{Wait: time.Millisecond}
		}), Reaction{Kind: ReactPark, After: time.Second}},
		{"paused key: park until the pause ends", with(func(b *BeforeCall) {
			b.Admission, b.Pause = allowed, ptr(5*time.Second)
		}), Reaction{Kind: ReactPark, After: 5 * time.Second}},
		{"the probe goes through a pause", with(func(b *BeforeCall) {
			b.Admission, b.Pause = &Admission{Allowed: true, Probe: true}, ptr(5*time.Second)
		}), Reaction{Kind: ReactGo}},
		{"already dead-lettered: cancel", with(func(b *BeforeCall) {
			b.Admission, b.Prior = allowed, &Prior{DeadLettered: true}
		}), Reaction{Kind: ReactCancel}},
		{"stored by an earlier run: complete without calling", with(func(b *BeforeCall) {
			b.Admission, b.Prior = allowed, &Prior{OKAttemptID: 3, ResultStored: true}
		}), Reaction{Kind: ReactComplete}},
		{"ok without result: call again", with(func(b *BeforeCall) {
			b.Admission, b.Prior = allowed, &Prior{OKAttemptID: 3}
		}), Reaction{Kind: ReactGo}},
		{"ambiguous sends used up", with(func(b *BeforeCall) {
			b.Admission, b.Prior = allowed, &Prior{JobAmbiguous: 2}
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousExhausted}},
		{"dead_letter policy: an unanswered call is never resent", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Policy = allowed, &Prior{JobAmbiguous: 1, JobCalls: 1}, config.AmbiguousDeadLetter
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousUnresolved}},
		{"dead_letter policy: a background response left running is polled, not dead-lettered", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Policy = allowed, &Prior{JobAmbiguous: 1, JobCalls: 1, PendingResponse: true}, config.AmbiguousDeadLetter
		}), Reaction{Kind: ReactGo}},
		{"ambiguous sends used up, a background response left running: polled", with(func(b *BeforeCall) {
			b.Admission, b.Prior = allowed, &Prior{JobAmbiguous: 2, PendingResponse: true}
		}), Reaction{Kind: ReactGo}},
		{"retry policy: an unanswered call is resent", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Policy = allowed, &Prior{JobAmbiguous: 1, JobCalls: 1}, config.AmbiguousRetry
		}), Reaction{Kind: ReactGo}},
		{"dead_letter policy: an answered record still completes", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Policy = allowed, &Prior{JobAmbiguous: 1, OKAttemptID: 3, ResultStored: true}, config.AmbiguousDeadLetter
		}), Reaction{Kind: ReactComplete}},
		{"lookup policy: a lost call is looked up before anything else", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Policy = allowed, &Prior{JobAmbiguous: 2, JobCalls: 2}, config.AmbiguousLookup
		}), Reaction{Kind: ReactLookup}},
		{"lookup policy: found: complete with the stored answer", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Policy = allowed, &Prior{JobAmbiguous: 2, JobCalls: 2}, config.AmbiguousLookup
			b.Lookup = Lookup{Asked: true, Found: true}
		}), Reaction{Kind: ReactCompleteFound}},
		{"lookup policy: found but unusable: invalid_output", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Policy = allowed, &Prior{JobAmbiguous: 1, JobCalls: 1}, config.AmbiguousLookup
			b.Lookup = Lookup{Asked: true, Found: true, Unusable: "not JSON"}
		}), Reaction{Kind: ReactDeadLetter, Class: classify.OK, Reason: ReasonInvalidOutput}},
		{"lookup policy: not found within lookup_wait: park and ask again", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Policy = allowed, &Prior{JobAmbiguous: 1, JobCalls: 1}, config.AmbiguousLookup
			b.Lookup = Lookup{Asked: true, Waited: time.Second, Wait: 30 * time.Second, Recheck: 2 * time.Second}
		}), Reaction{Kind: ReactPark, After: 2 * time.Second}},
		{"lookup policy: not found after lookup_wait: taken as not run, resent", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Policy = allowed, &Prior{JobAmbiguous: 1, JobCalls: 1}, config.AmbiguousLookup
			b.Lookup = Lookup{Asked: true, Waited: 30 * time.Second, Wait: 30 * time.Second}
		}), Reaction{Kind: ReactGo}},
		{"lookup policy: not found after lookup_wait, ambiguous sends used up: dead letter", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Policy = allowed, &Prior{JobAmbiguous: 2, JobCalls: 2}, config.AmbiguousLookup
			b.Lookup = Lookup{Asked: true, Waited: 30 * time.Second, Wait: 30 * time.Second}
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousExhausted}},
		{"lookup policy: nothing lost: no look-up", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.Policy = allowed, &Prior{JobCalls: 1}, config.AmbiguousLookup
		}), Reaction{Kind: ReactGo}},
		{"calls used up by crashed runs", with(func(b *BeforeCall) {
			b.Admission, b.Prior = allowed, &Prior{JobCalls: 6}
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Transient, Reason: ReasonRetriesExhausted}},
		{"five calls: one more may go", with(func(b *BeforeCall) {
			b.Admission, b.Prior = allowed, &Prior{JobCalls: 5}
		}), Reaction{Kind: ReactGo}},
		{"retry over the fleet budget: park", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.OverRetryBudget, b.RetryDefer = allowed, &Prior{}, true, 2*time.Second
		}), Reaction{Kind: ReactPark, After: 2 * time.Second}},
		{"the waits left too little of the deadline for the call: park", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.DeadlineNear = allowed, &Prior{}, true
		}), Reaction{Kind: ReactPark}},
		{"spend cap: park for the recheck", with(func(b *BeforeCall) {
			b.Admission, b.Prior, b.OverBudget, b.BudgetRecheck = allowed, &Prior{}, true, 30*time.Second
		}), Reaction{Kind: ReactPark, After: 30 * time.Second}},
		{"everything known and fine: go", with(func(b *BeforeCall) {
			b.Admission, b.Prior = allowed, &Prior{JobCalls: 2, JobAmbiguous: 1}
		}), Reaction{Kind: ReactGo}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Before(tt.in)
			got.Detail = ""
			require.Equal(t, tt.want, got)
		})
	}
}

// TestDecideBeforeOpenLine pins the open-line rule in the one decision
// every path asks (a job's run, the fallback mover): a live line waits for
// its answer whatever else holds; a paid answer is applied rather than
// the record ended or moved; an unsent line does not hold the record.
func TestDecideBeforeOpenLine(t *testing.T) {
	t.Parallel()
	const wait = time.Hour
	grace := time.Minute
	openFor := time.Hour
	fb := FallbackFacts{Model: &config.Model{Name: "fb"}, OpenFor: &openFor, Grace: grace}
	exhausted := &Admission{Wait: 30 * time.Second}
	allowed := &Admission{Allowed: true}
	with := func(line Line, f func(b *BeforeCall)) BeforeCall {
		b := job()
		b.Line, b.LineWait = line, wait
		f(&b)
		return b
	}
	pastRuns := func(b *BeforeCall) { b.Attempt = 50 }
	tooOld := func(b *BeforeCall) { b.Age = 48 * time.Hour }
	snoozedOut := func(b *BeforeCall) { b.OwnSnoozes = 100 }
	openKey := func(b *BeforeCall) { b.Admission, b.Fallback = exhausted, fb }
	callsUsed := func(b *BeforeCall) { b.Admission, b.Prior = allowed, &Prior{JobCalls: 6, JobAmbiguous: 3} }
	park := Reaction{Kind: ReactPark, After: wait}
	tests := []struct {
		name string
		in   BeforeCall
		want ReactionKind
	}{
		{"live line, past its runs: waits", with(LineLive, pastRuns), ReactPark},
		{"live line, too old: waits", with(LineLive, tooOld), ReactPark},
		{"live line, snoozed out: waits", with(LineLive, snoozedOut), ReactPark},
		{"live line, key open past the grace: not moved", with(LineLive, openKey), ReactPark},
		{"answered, past its runs: applied", with(LineAnswered, pastRuns), ReactGo},
		{"answered, too old: applied", with(LineAnswered, tooOld), ReactGo},
		{"answered, snoozed out: applied", with(LineAnswered, snoozedOut), ReactGo},
		{"answered, calls used up: applied", with(LineAnswered, callsUsed), ReactGo},
		{"answered, key open past the grace: applied (it sends nothing), not moved", with(LineAnswered, openKey), ReactGo},
		{"unsent, key open past the grace: moves (taking the line back)", with(LineUnsent, openKey), ReactFallback},
		{"unsent, past its runs: dead-lettered (taking the line back)", with(LineUnsent, pastRuns), ReactDeadLetter},
		{"no line, too old: dead-lettered", with(LineNone, tooOld), ReactDeadLetter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Before(tt.in)
			require.Equal(t, tt.want, got.Kind, "%s", got)
			if tt.in.Line == LineLive {
				require.Equal(t, park, got)
			}
		})
	}
}

// TestDecideBeforeCacheHit pins where a response-cache hit sits among the
// checks before a call: after the breakers and the dead-letter and
// stored-result checks, before anything that would call or give up.
func TestDecideBeforeCacheHit(t *testing.T) {
	t.Parallel()
	allowed := &Admission{Allowed: true}
	with := func(f func(b *BeforeCall)) BeforeCall {
		b := job()
		f(&b)
		return b
	}
	hit := func(p Prior) func(b *BeforeCall) {
		return func(b *BeforeCall) { b.Admission, b.Prior, b.CacheHit = allowed, &p, true }
	}
	tests := []struct {
		name string
		in   BeforeCall
		want Reaction
	}{
		{"a stored answer: complete from the cache", with(hit(Prior{})), Reaction{Kind: ReactCacheHit}},
		{"no stored answer: call", with(func(b *BeforeCall) { b.Admission, b.Prior = allowed, &Prior{} }), Reaction{Kind: ReactGo}},
		{"dead-lettered already: cancel, not answered", with(hit(Prior{DeadLettered: true})), Reaction{Kind: ReactCancel}},
		{"own result stored: complete without a second result", with(hit(Prior{OKAttemptID: 3, ResultStored: true})),
			Reaction{Kind: ReactComplete}},
		{"own sends got no answer: the stored one beats dead-lettering", with(hit(Prior{JobAmbiguous: 2})),
			Reaction{Kind: ReactCacheHit}},
		{"own calls used up: the stored one beats dead-lettering", with(hit(Prior{JobCalls: 6})),
			Reaction{Kind: ReactCacheHit}},
		{"over the retry budget: no call needed", with(func(b *BeforeCall) {
			hit(Prior{JobLast: LastAttempt{Seen: true, Class: classify.Transient}})(b)
			b.OverRetryBudget, b.RetryDefer = true, time.Second
		}), Reaction{Kind: ReactCacheHit}},
		{"batch at its spend cap: a $0 answer still lands", with(func(b *BeforeCall) {
			hit(Prior{})(b)
			b.OverBudget, b.BudgetRecheck = true, 30*time.Second
		}), Reaction{Kind: ReactCacheHit}},
		{"breaker open: the job parks with the key's queue", with(func(b *BeforeCall) {
			hit(Prior{})(b)
			b.Admission = &Admission{Wait: 30 * time.Second}
		}), Reaction{Kind: ReactPark, After: BreakerPark}},
		{"worker errors used up the runs: still dead-lettered first", with(func(b *BeforeCall) {
			hit(Prior{})(b)
			b.Attempt = 7
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Transient, Reason: ReasonWorkerErrors}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Before(tt.in)
			got.Detail = ""
			require.Equal(t, tt.want, got)
		})
	}
	require.Equal(t, "cache_hit", ReactCacheHit.String())
	require.Equal(t, "cache_hit", Reaction{Kind: ReactCacheHit}.String())
}

// TestDecideBeforeChangeLost: a run that finds its own unchanged request
// already rejected (the change was lost in a crash) never resends it.
func TestDecideBeforeChangeLost(t *testing.T) {
	t.Parallel()
	b := job()
	b.Admission = &Admission{Allowed: true}
	b.Prior = &Prior{JobLast: LastAttempt{Seen: true, Class: classify.Rejected}}
	got := Before(b)
	require.Equal(t, ReactDeadLetter, got.Kind)
	require.Equal(t, ReasonChangeLost, got.Reason)

	// Earlier throttles or transients of the same request are no such thing.
	b.Prior.JobLast.Class = classify.Throttled
	require.Equal(t, ReactGo, Before(b).Kind)
}

func TestUnsentLineWait(t *testing.T) {
	for _, tc := range []struct {
		name          string
		age, maxAge   time.Duration
		lineWait, out time.Duration
	}{
		{"young job: the line wait", time.Minute, 24 * time.Hour, time.Hour, time.Hour},
		{"MaxAge nearer than the line wait: just past it", 50 * time.Minute, time.Hour, time.Hour, 10*time.Minute + time.Second},
		{"past MaxAge already: soon", 2 * time.Hour, time.Hour, time.Hour, time.Second},
		{"no MaxAge: the line wait", time.Hour, 0, time.Hour, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := BeforeCall{Age: tc.age, MaxAge: tc.maxAge, LineWait: tc.lineWait}
			require.Equal(t, tc.out, b.UnsentLineWait())
		})
	}
}
