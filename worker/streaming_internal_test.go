package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/provider"
)

// TestDecideAfterCutStream: a stream cut midway is ambiguous whatever it
// carried, unless the pipeline accepts partials and enough text arrived.
func TestDecideAfterCutStream(t *testing.T) {
	t.Parallel()
	cut := func(f ...func(a *after)) after {
		a := after{Verdict: classify.Verdict{Class: classify.Ambiguous, Reason: "stream_failed", Known: true},
			Phase: classify.PhaseStream, MaxAttempts: 6, AmbiguousRetries: 1, RetryBudget: 0.2,
			Backoff: 4 * time.Second, BackoffCap: 5 * time.Minute, KeyWide: true, ProbeInterval: time.Minute,
			PartialChars: 120}
		for _, fn := range f {
			fn(&a)
		}
		return a
	}
	accept := func(n int) func(a *after) { return func(a *after) { a.AcceptPartialMinChars = n } }
	tests := []struct {
		name string
		in   after
		want Reaction
	}{
		{"cut stream without accept_partial: ambiguous retry", cut(),
			Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: ledger.AttemptPossiblyBilled}},
		{"cut stream, second time: dead letter keeps it possibly billed", cut(func(a *after) { a.JobAmbiguous = 1 }),
			Reaction{Kind: ReactDeadLetter, Class: classify.Ambiguous, Reason: ReasonAmbiguousExhausted, Outcome: ledger.AttemptPossiblyBilled}},
		{"enough text: the partial is the result", cut(accept(100)),
			Reaction{Kind: ReactCompletePartial, Outcome: ledger.AttemptPossiblyBilled}},
		{"exactly the minimum is enough", cut(accept(120)),
			Reaction{Kind: ReactCompletePartial, Outcome: ledger.AttemptPossiblyBilled}},
		{"enough text on the last ambiguous send: still accepted", cut(accept(100), func(a *after) { a.JobAmbiguous = 1 }),
			Reaction{Kind: ReactCompletePartial, Outcome: ledger.AttemptPossiblyBilled}},
		{"too little text: ambiguous retry", cut(accept(121)),
			Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: ledger.AttemptPossiblyBilled}},
		{"nothing arrived: ambiguous retry", cut(accept(1), func(a *after) { a.PartialChars = 0 }),
			Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: ledger.AttemptPossiblyBilled}},
		{"a whole answer is never a partial", cut(accept(10), func(a *after) {
			a.Phase, a.Verdict = classify.PhaseResponse, classify.Verdict{Class: classify.OK, Known: true}
		}), Reaction{Kind: ReactComplete, Outcome: ledger.AttemptOK}},
		{"no answer at all (hang) is not a partial", cut(accept(10), func(a *after) { a.Phase = classify.PhaseSentNoResponse }),
			Reaction{Kind: ReactRetry, After: 4 * time.Second, Outcome: ledger.AttemptPossiblyBilled}},
		{"a rule that calls the broken stream rejected wins", cut(accept(10), func(a *after) {
			a.Verdict = classify.Verdict{Class: classify.Rejected, Reason: "user_rule"}
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Rejected, Reason: "user_rule", Outcome: ledger.AttemptFailed}},
		{"a run stopped mid-stream parks, possibly billed, partial or not", cut(accept(10), func(a *after) { a.Cancelled = true }),
			Reaction{Kind: ReactPark, After: time.Second, Outcome: ledger.AttemptPossiblyBilled}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := decideAfter(tt.in)
			got.Detail = ""
			require.Equal(t, tt.want, got)
			require.Equal(t, keys.OutcomeExcluded == breakerOutcome(tt.in), tt.in.Verdict.Class == classify.Ambiguous && !tt.in.stopped())
		})
	}
}

// TestKeepPartial: a cut stream is priced at what arrived (estimated where
// the stream did not say), and the rest of its estimate stays possibly
// billed; billed plus possibly billed is the estimate.
func TestKeepPartial(t *testing.T) {
	t.Parallel()
	m := &config.Model{Name: "m", InputUSDPerMTok: 1, OutputUSDPerMTok: 2}
	c := &call{model: m, req: provider.Request{System: "ssss", Prompt: "pppppppp", MaxTokens: 100}}
	c.res.Observation.Phase = classify.PhaseStream
	c.res.Content = "héllo wörld" // 11 characters, 13 bytes
	require.Equal(t, 11, c.keepPartial())
	require.Equal(t, 3, c.res.InputTokens)
	require.Equal(t, 4, c.res.OutputTokens)
	require.Equal(t, "héllo wörld", c.partial.Text)
	received := cost(m, 3, 4)
	require.InDelta(t, estimateCost(m, c.req)-received, c.partial.RestEstimateUSD, 1e-12)

	// Usage the stream did report (Anthropic's message_start) is kept.
	c2 := &call{model: m, req: c.req}
	c2.res.Observation.Phase = classify.PhaseStream
	c2.res.InputTokens = 40
	require.Zero(t, c2.keepPartial())
	require.Equal(t, 40, c2.res.InputTokens)
	require.Zero(t, c2.res.OutputTokens)
	require.NotNil(t, c2.partial, "a stream that started is kept even with no text")

	// A whole answer is not a partial.
	c3 := &call{model: m, req: c.req}
	c3.res.Observation.Phase = classify.PhaseResponse
	c3.res.Content = "done"
	require.Zero(t, c3.keepPartial())
	require.Nil(t, c3.partial)
}
