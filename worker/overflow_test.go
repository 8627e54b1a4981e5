package worker

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
)

// TestDecideAfterChanged: a rejection a changed request can get past is
// retried changed once, never twice, and only where the pipeline allows it.
func TestDecideAfterChanged(t *testing.T) {
	t.Parallel()
	rejected := func(reason string, f changeFacts) after {
		return after{Phase: classify.PhaseResponse, MaxAttempts: 6, AmbiguousRetries: 1,
			Verdict: classify.Verdict{Class: classify.Rejected, Reason: reason, Known: true}, Change: f}
	}
	dl := func(reason string) Reaction {
		return Reaction{Kind: ReactDeadLetter, Class: classify.Rejected, Reason: reason, Outcome: ledger.AttemptFailed}
	}
	tests := []struct {
		name string
		in   after
		want Reaction
	}{
		{"overflow, default dead_letter: dead letter", rejected(ReasonContextLength, changeFacts{Cut: 500}), dl(ReasonContextLength)},
		{"overflow, truncate: retry once with the cut", rejected(ReasonContextLength, changeFacts{Truncate: true, Cut: 500}),
			Reaction{Kind: ReactRetryChanged, Change: change{MaxFieldChars: 500}, Outcome: ledger.AttemptFailed}},
		{"overflow again after the truncated retry: dead letter", rejected(ReasonContextLength, changeFacts{Truncate: true, Changed: true}),
			dl(ReasonContextLength)},
		{"overflow that no cut fixes: dead letter", rejected(ReasonContextLength, changeFacts{Truncate: true}), dl(ReasonContextLength)},
		{"json mode refused: retry once without it", rejected(ReasonJSONModeRefused, changeFacts{JSON: true}),
			Reaction{Kind: ReactRetryChanged, Change: change{DropJSON: true}, Outcome: ledger.AttemptFailed}},
		{"json mode refused on a request without it: dead letter", rejected(ReasonJSONModeRefused, changeFacts{}), dl(ReasonJSONModeRefused)},
		{"json mode refused after a truncation: at most one change", rejected(ReasonJSONModeRefused, changeFacts{JSON: true, Changed: true}),
			dl(ReasonJSONModeRefused)},
		{"another rejection is never changed", rejected("content_filter", changeFacts{Truncate: true, Cut: 500, JSON: true}), dl("content_filter")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := decideAfter(tt.in)
			got.Detail = ""
			require.Equal(t, tt.want, got)
		})
	}
	require.Contains(t, decideAfter(rejected(ReasonContextLength, changeFacts{Truncate: true, Changed: true})).Detail, "both attempts")
}

func TestFitCut(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 2000) // 10,000 characters
	record := map[string]any{"id": "r1", "body": long, "title": "short", "tags": []any{"a", strings.Repeat("x", 300)}}
	prompt := 10_400

	// OpenAI: "maximum context length is 2000 tokens. However, your
	// messages resulted in 2600 tokens" with max_tokens 256.
	cut := fitCut(record, prompt, classify.Overflow{Limit: 2000, Input: 2600}, 0, 256)
	require.Positive(t, cut)
	// The cut removes at least the excess: (2600-1744) tokens at 4 chars.
	require.LessOrEqual(t, cut, 10_000-856*4)
	truncated := truncateStrings(record, cut).(map[string]any)
	require.Equal(t, "short", truncated["title"], "short fields are left alone")
	require.Len(t, truncated["body"], cut)

	// The model's context_tokens is used when smaller than the vendor's,
	// and is the only limit when the message gives no numbers.
	require.Less(t, fitCut(map[string]any{"b": long}, prompt, classify.Overflow{Limit: 2000, Input: 2600}, 1500, 256), cut)
	require.Positive(t, fitCut(map[string]any{"b": long}, prompt, classify.Overflow{}, 2000, 256))
	// Nothing to go by, or nothing long enough to cut: no retry.
	require.Zero(t, fitCut(map[string]any{"b": long}, prompt, classify.Overflow{}, 0, 256))
	require.Zero(t, fitCut(map[string]any{"n": 12.5, "b": "tiny"}, prompt, classify.Overflow{Limit: 2000, Input: 2600}, 0, 256))
}

func TestWaterLevel(t *testing.T) {
	t.Parallel()
	require.Equal(t, 70, waterLevel([]int{100, 50}, 30))
	require.Equal(t, 40, waterLevel([]int{100, 50}, 70)) // 60 + 10
	require.Equal(t, 0, waterLevel([]int{100, 50}, 150))
	require.Equal(t, 0, waterLevel(nil, 1))
}

func TestJobChangeRoundTrip(t *testing.T) {
	t.Parallel()
	require.True(t, jobChange([]byte(`{"snoozes":2}`)).isZero())
	ch := jobChange([]byte(`{"triage_change":{"max_field_chars":120,"drop_json":true}}`))
	require.Equal(t, change{MaxFieldChars: 120, DropJSON: true}, ch)
	require.Equal(t, "truncated+dropped_json_mode", ch.label())
	require.True(t, ledger.Truncated(ch.label()))
	require.False(t, ledger.Truncated(change{DropJSON: true}.label()))
}

// TestDecideBeforeChangeLost: a run that finds its own unchanged request
// already rejected (the change was lost in a crash) never resends it.
func TestDecideBeforeChangeLost(t *testing.T) {
	t.Parallel()
	b := job()
	b.Admission = &keys.Admission{Allowed: true}
	b.Prior = &ledger.Prior{Attempts: 1, JobLast: ledger.LastAttempt{Seen: true, Class: classify.Rejected}}
	got := decideBefore(b)
	require.Equal(t, ReactDeadLetter, got.Kind)
	require.Equal(t, ReasonChangeLost, got.Reason)

	// Earlier throttles or transients of the same request are no such thing.
	b.Prior.JobLast.Class = classify.Throttled
	require.Equal(t, ReactGo, decideBefore(b).Kind)
}
