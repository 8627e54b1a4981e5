package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/worker/config"
)

func TestDecideAfter(t *testing.T) {
	t.Parallel()
	verdict := func(c classify.Class, retryAfterS ...float64) classify.Verdict {
		v := classify.Verdict{Class: c, Reason: "r", Known: true}
		if len(retryAfterS) > 0 {
			v.RetryAfterS = &retryAfterS[0]
		}
		return v
	}
	call := func(v classify.Verdict, f ...func(a *AfterCall)) AfterCall {
		a := AfterCall{Verdict: v, Phase: classify.PhaseResponse, MaxAttempts: 6, AmbiguousRetries: 1, RetryBudget: 0.2,
			Backoff: 4 * time.Second, BackoffCap: 5 * time.Minute, Throttle: 20 * time.Second, KeyWide: true,
			ProbeInterval: time.Minute}
		for _, fn := range f {
			fn(&a)
		}
		return a
	}
	storm := func(a *AfterCall) { a.Storm = Storm{Open: true, Wait: 8 * time.Second} }
	shortStorm := func(a *AfterCall) { a.Storm = Storm{Open: true, Wait: 300 * time.Millisecond} }
	tests := []struct {
		name string
		in   AfterCall
		want Reaction
	}{
		{"ok completes", call(verdict(classify.OK)),
			Reaction{Kind: ReactComplete, Outcome: OutcomeOK}},
		{"rejected while the safety net holds the key for it: parks until the probe", call(verdict(classify.Rejected), func(a *AfterCall) { a.Held = true }),
			Reaction{Kind: ReactTrip, After: time.Minute, Outcome: OutcomeFailed}},
		{"throttled while the safety net holds the key for it: parks, not its own snooze", call(verdict(classify.Throttled), func(a *AfterCall) { a.Held = true }),
			Reaction{Kind: ReactTrip, After: time.Minute, Outcome: OutcomeFailed}},
		{"ok but not json: invalid output, billed", call(verdict(classify.OK), func(a *AfterCall) { a.Unusable = "not json" }),
			Reaction{Kind: ReactDeadLetter, Class: classify.OK, Reason: ReasonInvalidOutput, Outcome: OutcomeOK}},
		{"garbage 2xx: invalid output, possibly billed", call(verdict(classify.OK), func(a *AfterCall) { a.Unusable, a.Malformed = "garbage", true }),
			Reaction{Kind: ReactDeadLetter, Class: classify.OK, Reason: ReasonInvalidOutput, Outcome: OutcomePossiblyBilled}},
		{"transient retries after the backoff", call(verdict(classify.Transient)),
			Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: OutcomeFailed}},
		{"transient with a longer hint waits for it", call(verdict(classify.Transient, 30)),
			Reaction{Kind: ReactRetry, After: 30 * time.Second, Outcome: OutcomeFailed}},
		{"transient with retry-after a day waits the 5 min cap", call(verdict(classify.Transient, 86400)),
			Reaction{Kind: ReactRetry, After: 5 * time.Minute, Outcome: OutcomeFailed}},
		{"transient on the last call: retries exhausted", call(verdict(classify.Transient), func(a *AfterCall) { a.JobCalls = 5 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Transient, Reason: ReasonRetriesExhausted, Outcome: OutcomeFailed}},
		{"transient with retry_budget 0: no retry", call(verdict(classify.Transient), func(a *AfterCall) { a.NoRetries, a.RetryBudget = true, 0 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Transient, Reason: ReasonRetriesExhausted, Outcome: OutcomeFailed}},
		{"transient in a storm parks in the paused queue", call(verdict(classify.Transient), storm),
			Reaction{Kind: ReactStorm, After: BreakerPark, Outcome: OutcomeFailed}},
		{"transient in a storm with the probe due sooner", call(verdict(classify.Transient), shortStorm),
			Reaction{Kind: ReactStorm, After: 300 * time.Millisecond, Outcome: OutcomeFailed}},
		{"a storm does not save the last call", call(verdict(classify.Transient), storm, func(a *AfterCall) { a.JobCalls = 5 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Transient, Reason: ReasonRetriesExhausted, Outcome: OutcomeFailed}},
		{"throttled pauses the key", call(verdict(classify.Throttled, 20)),
			Reaction{Kind: ReactPauseKey, After: 20 * time.Second, Outcome: OutcomeFailed}},
		{"throttled for this job only snoozes it", call(verdict(classify.Throttled, 20), func(a *AfterCall) { a.KeyWide = false }),
			Reaction{Kind: ReactSnooze, After: 20 * time.Second, Outcome: OutcomeFailed}},
		{"throttled in a storm is still a throttle", call(verdict(classify.Throttled, 20), storm),
			Reaction{Kind: ReactPauseKey, After: 20 * time.Second, Outcome: OutcomeFailed}},
		{"exhausted trips and parks for the probe", call(verdict(classify.Exhausted)),
			Reaction{Kind: ReactTrip, After: time.Minute, Outcome: OutcomeFailed}},
		{"ambiguous retries with the same key", call(verdict(classify.Ambiguous)),
			Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: OutcomePossiblyBilled}},
		{"second ambiguous: dead letter", call(verdict(classify.Ambiguous), func(a *AfterCall) { a.JobAmbiguous = 1 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousExhausted, Outcome: OutcomePossiblyBilled}},
		{"dead_letter policy: the first ambiguous call is dead-lettered", call(verdict(classify.Ambiguous), func(a *AfterCall) { a.Policy = config.AmbiguousDeadLetter }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousUnresolved, Outcome: OutcomePossiblyBilled}},
		{"lookup policy: even the last ambiguous send is looked up first", call(verdict(classify.Ambiguous), func(a *AfterCall) {
			a.JobAmbiguous, a.Policy = 1, config.AmbiguousLookup
		}), Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: OutcomePossiblyBilled}},
		{"ambiguous on the last call: dead letter", call(verdict(classify.Ambiguous), func(a *AfterCall) { a.JobCalls, a.AmbiguousRetries = 5, 3 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousExhausted, Outcome: OutcomePossiblyBilled}},
		{"rejected: dead letter with the classifier's reason", call(classify.Verdict{Class: classify.Rejected, Reason: "context_length"}),
			Reaction{Kind: ReactDeadLetter, Class: classify.Rejected, Reason: "context_length", Outcome: OutcomeFailed}},
		{"client refused the request: config dead letter", call(classify.Verdict{}, func(a *AfterCall) { a.ClientErr = "bad" }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Rejected, Reason: ReasonConfig, Outcome: OutcomeFailed}},
		{"stopped before sending: park, not billed", call(classify.Verdict{}, func(a *AfterCall) { a.Cancelled, a.Phase = true, classify.PhaseNotSent }),
			Reaction{Kind: ReactPark, After: time.Second, Outcome: OutcomeFailed}},
		{"stopped after sending: park, possibly billed", call(classify.Verdict{}, func(a *AfterCall) { a.Cancelled, a.Phase = true, classify.PhaseSentNoResponse }),
			Reaction{Kind: ReactPark, After: time.Second, Outcome: OutcomePossiblyBilled}},
		{"stopped, but the answer had arrived: it is stored", call(verdict(classify.OK), func(a *AfterCall) { a.Cancelled, a.Phase = true, classify.PhaseResponse }),
			Reaction{Kind: ReactComplete, Outcome: OutcomeOK}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := After(tt.in)
			got.Detail = ""
			require.Equal(t, tt.want, got)
		})
	}
}

func TestTransientWait(t *testing.T) {
	t.Parallel()
	require.Equal(t, 4*time.Second, TransientWait(4*time.Second, 0, 5*time.Minute))
	require.Equal(t, 5*time.Minute, TransientWait(time.Second, 24*time.Hour, 5*time.Minute))
	// A backoff above the cap (a test's tiny cap) is never cut below itself.
	require.Equal(t, time.Second, TransientWait(time.Second, time.Hour, time.Millisecond))
}

// TestDecideAfterCutStream: a stream cut midway is ambiguous whatever it
// carried, unless the pipeline accepts partials and enough text arrived.
func TestDecideAfterCutStream(t *testing.T) {
	t.Parallel()
	cut := func(f ...func(a *AfterCall)) AfterCall {
		a := AfterCall{Verdict: classify.Verdict{Class: classify.Ambiguous, Reason: "stream_failed", Known: true},
			Phase: classify.PhaseStream, MaxAttempts: 6, AmbiguousRetries: 1, RetryBudget: 0.2,
			Backoff: 4 * time.Second, BackoffCap: 5 * time.Minute, KeyWide: true, ProbeInterval: time.Minute,
			PartialChars: 120}
		for _, fn := range f {
			fn(&a)
		}
		return a
	}
	accept := func(n int) func(a *AfterCall) { return func(a *AfterCall) { a.AcceptPartialMinChars = n } }
	tests := []struct {
		name string
		in   AfterCall
		want Reaction
	}{
		{"cut stream without accept_partial: ambiguous retry", cut(),
			Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: OutcomePossiblyBilled}},
		{"cut stream, second time: dead letter keeps it possibly billed", cut(func(a *AfterCall) { a.JobAmbiguous = 1 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousExhausted, Outcome: OutcomePossiblyBilled}},
		{"enough text: the partial is the result", cut(accept(100)),
			Reaction{Kind: ReactCompletePartial, Outcome: OutcomePossiblyBilled}},
		{"exactly the minimum is enough", cut(accept(120)),
			Reaction{Kind: ReactCompletePartial, Outcome: OutcomePossiblyBilled}},
		{"enough text on the last ambiguous send: still accepted", cut(accept(100), func(a *AfterCall) { a.JobAmbiguous = 1 }),
			Reaction{Kind: ReactCompletePartial, Outcome: OutcomePossiblyBilled}},
		{"too little text: ambiguous retry", cut(accept(121)),
			Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: OutcomePossiblyBilled}},
		{"nothing arrived: ambiguous retry", cut(accept(1), func(a *AfterCall) { a.PartialChars = 0 }),
			Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: OutcomePossiblyBilled}},
		{"a whole answer is never a partial", cut(accept(10), func(a *AfterCall) {
			a.Phase, a.Verdict = classify.PhaseResponse, classify.Verdict{Class: classify.OK, Known: true}
		}), Reaction{Kind: ReactComplete, Outcome: OutcomeOK}},
		{"no answer at all (hang) is not a partial", cut(accept(10), func(a *AfterCall) { a.Phase = classify.PhaseSentNoResponse }),
			Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: OutcomePossiblyBilled}},
		{"a rule that calls the broken stream rejected wins", cut(accept(10), func(a *AfterCall) {
			a.Verdict = classify.Verdict{Class: classify.Rejected, Reason: "user_rule"}
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Rejected, Reason: "user_rule", Outcome: OutcomeFailed}},
		{"a run stopped mid-stream parks, possibly billed, partial or not", cut(accept(10), func(a *AfterCall) { a.Cancelled = true }),
			Reaction{Kind: ReactPark, After: time.Second, Outcome: OutcomePossiblyBilled}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := After(tt.in)
			got.Detail = ""
			require.Equal(t, tt.want, got)
		})
	}
}

// TestDecideAfterChanged: a rejection a changed request can get past is
// retried changed once, never twice, and only where the pipeline allows it.
func TestDecideAfterChanged(t *testing.T) {
	t.Parallel()
	rejected := func(reason string, f ChangeFacts) AfterCall {
		return AfterCall{Phase: classify.PhaseResponse, MaxAttempts: 6, AmbiguousRetries: 1,
			Verdict: classify.Verdict{Class: classify.Rejected, Reason: reason, Known: true}, Change: f}
	}
	dl := func(reason string) Reaction {
		return Reaction{Kind: ReactDeadLetter, Class: classify.Rejected, Reason: reason, Outcome: OutcomeFailed}
	}
	tests := []struct {
		name string
		in   AfterCall
		want Reaction
	}{
		{"overflow, default dead_letter: dead letter", rejected(ReasonContextLength, ChangeFacts{Cut: 500}), dl(ReasonContextLength)},
		{"overflow, truncate: retry once with the cut", rejected(ReasonContextLength, ChangeFacts{Truncate: true, Cut: 500}),
			Reaction{Kind: ReactRetryChanged, Change: Change{MaxFieldChars: 500}, Outcome: OutcomeFailed}},
		{"overflow again after the truncated retry: dead letter", rejected(ReasonContextLength, ChangeFacts{Truncate: true, Changed: true}),
			dl(ReasonContextLength)},
		{"overflow that no cut fixes: dead letter", rejected(ReasonContextLength, ChangeFacts{Truncate: true}), dl(ReasonContextLength)},
		{"json mode refused: retry once without it", rejected(ReasonJSONModeRefused, ChangeFacts{JSON: true}),
			Reaction{Kind: ReactRetryChanged, Change: Change{DropJSON: true}, Outcome: OutcomeFailed}},
		{"json mode refused on a request without it: dead letter", rejected(ReasonJSONModeRefused, ChangeFacts{}), dl(ReasonJSONModeRefused)},
		{"json mode refused after a truncation: at most one change", rejected(ReasonJSONModeRefused, ChangeFacts{JSON: true, Changed: true}),
			dl(ReasonJSONModeRefused)},
		{"another rejection is never changed", rejected("content_filter", ChangeFacts{Truncate: true, Cut: 500, JSON: true}), dl("content_filter")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := After(tt.in)
			got.Detail = ""
			require.Equal(t, tt.want, got)
		})
	}
	require.Contains(t, After(rejected(ReasonContextLength, ChangeFacts{Truncate: true, Changed: true})).Detail, "both attempts")
}

// A batch line's answer is decided as a synchronous call's; only the waits
// become "the next provider batch".
func TestBatchReaction(t *testing.T) {
	t.Parallel()
	base := AfterCall{JobCalls: 1, MaxAttempts: 6, AmbiguousRetries: 1, RetryBudget: 0.2,
		Backoff: BatchRequeueWait, BackoffCap: BatchRequeueWait, ProbeInterval: time.Minute, Phase: classify.PhaseResponse}
	for _, tc := range []struct {
		class   classify.Class
		want    ReactionKind
		outcome Outcome
	}{
		{classify.OK, ReactComplete, OutcomeOK},
		{classify.Rejected, ReactDeadLetter, OutcomeFailed},
		{classify.Transient, ReactPark, OutcomeFailed},
		{classify.Throttled, ReactPark, OutcomeFailed},
		{classify.Exhausted, ReactTrip, OutcomeFailed},
	} {
		t.Run(tc.class.String(), func(t *testing.T) {
			t.Parallel()
			a := base
			a.Verdict = classify.Verdict{Class: tc.class, Reason: "r", Known: true}
			a.Throttle = BatchRequeueWait
			rx := ForBatchLine(After(a))
			require.Equal(t, tc.want, rx.Kind, rx.String())
			require.Equal(t, tc.outcome, rx.Outcome)
			if rx.Kind == ReactPark {
				require.Equal(t, BatchRequeueWait, rx.After)
			}
		})
	}
	// Spent attempts end in the dead letters, as for a synchronous call.
	a := base
	a.JobCalls = 5
	a.Verdict = classify.Verdict{Class: classify.Transient, Reason: "server_error", Known: true}
	rx := ForBatchLine(After(a))
	require.Equal(t, ReactDeadLetter, rx.Kind)
	require.Equal(t, ReasonRetriesExhausted, rx.Reason)
}
