package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/worker/config"
)

func TestCapable(t *testing.T) {
	t.Parallel()
	short := Need{InputTokens: 100, MaxTokens: 1000, JSON: true}
	text := short
	text.JSON = false
	tests := []struct {
		name string
		m    config.Model
		r    Need
		want bool
	}{
		{"unknown limits, json mode", config.Model{JSONMode: true}, short, true},
		{"fits the window exactly", config.Model{ContextTokens: 1100, JSONMode: true}, short, true},
		{"prompt plus max_tokens over the window", config.Model{ContextTokens: 1099, JSONMode: true}, short, false},
		{"max_tokens over the output limit", config.Model{MaxOutputTokens: 999, JSONMode: true}, short, false},
		{"max_tokens within the output limit", config.Model{MaxOutputTokens: 1000, JSONMode: true}, short, true},
		{"json pipeline needs json_mode", config.Model{}, short, false},
		{"text pipeline does not", config.Model{}, text, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Capable(&tt.m, tt.r))
		})
	}
}

func TestFirstCapable(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Models: []config.Model{
		{Name: "primary", Key: "a"},
		{Name: "small", Key: "b", ContextTokens: 500, JSONMode: true},
		{Name: "nojson", Key: "c"},
		{Name: "big", Key: "d", ContextTokens: 100000, JSONMode: true},
	}}
	p := &config.Pipeline{Model: "primary", Fallback: []string{"small", "nojson", "big"}}
	shortReq := Need{InputTokens: 0, MaxTokens: 100, JSON: true}
	longReq := Need{InputTokens: 1000, MaxTokens: 100, JSON: true}
	require.Equal(t, "small", FirstCapable(cfg, p, "primary", shortReq).Name, "the first capable one, in order")
	require.Equal(t, "big", FirstCapable(cfg, p, "primary", longReq).Name, "too small and no JSON mode are passed over")
	require.Equal(t, "big", FirstCapable(cfg, p, "small", shortReq).Name, "never back to an earlier one")
	require.Nil(t, FirstCapable(cfg, p, "big", shortReq), "the last fallback has nowhere to go")
	require.Nil(t, FirstCapable(cfg, &config.Pipeline{Model: "primary"}, "primary", shortReq), "no fallback listed")
}

func TestDecideFallback(t *testing.T) {
	t.Parallel()
	fb := &config.Model{Name: "fb", Key: "b"}
	open := func(d time.Duration) FallbackFacts {
		return FallbackFacts{Model: fb, OpenFor: &d, Grace: 30 * time.Second}
	}
	exhausted := &Admission{Wait: 10 * time.Second}
	storm := &Admission{Storm: true, Wait: 10 * time.Second}
	with := func(adm *Admission, f FallbackFacts) BeforeCall {
		b := job()
		b.Admission, b.Fallback = adm, f
		return b
	}
	t.Run("before", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name string
			in   BeforeCall
			want ReactionKind
		}{
			{"exhausted past the grace: fall back", with(exhausted, open(31*time.Second)), ReactFallback},
			{"storm past the grace: fall back", with(storm, open(30*time.Second)), ReactFallback},
			{"within the grace: park on the primary", with(exhausted, open(29*time.Second)), ReactPark},
			{"open for an unknown time (the per-job path): park", with(exhausted, FallbackFacts{Model: fb, Grace: time.Second}), ReactPark},
			{"no capable fallback: park on the primary", with(exhausted, FallbackFacts{OpenFor: ptr(time.Hour)}), ReactPark},
			{"admitted: go, whatever the fallback", with(&Admission{Allowed: true}, open(time.Hour)), ReactGo},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				rx := Before(tt.in)
				require.Equal(t, tt.want, rx.Kind, "%s", rx)
				if rx.Kind == ReactFallback {
					require.Same(t, fb, rx.Fallback.Model)
					require.Equal(t, ReactPark, rx.Fallback.Otherwise.Kind, "refused by fallback_max_share: wait on the primary")
				}
			})
		}
	})
	t.Run("after", func(t *testing.T) {
		t.Parallel()
		call := func(c classify.Class, calls int, f *config.Model) AfterCall {
			return AfterCall{Verdict: classify.Verdict{Class: c, Reason: "r", Known: true}, Phase: classify.PhaseResponse,
				JobCalls: calls, MaxAttempts: 6, AmbiguousRetries: 1, RetryBudget: 0.2, Backoff: time.Second,
				BackoffCap: time.Minute, ProbeInterval: time.Minute, KeyWide: true, Fallback: FallbackFacts{Model: f}}
		}
		tests := []struct {
			name string
			in   AfterCall
			want ReactionKind
		}{
			{"transient attempts spent: fall back", call(classify.Transient, 5, fb), ReactFallback},
			{"transient attempts spent, no capable fallback: dead letter", call(classify.Transient, 5, nil), ReactDeadLetter},
			{"transient with attempts left: retry on the primary", call(classify.Transient, 2, fb), ReactRetry},
			{"rejected never falls back", call(classify.Rejected, 5, fb), ReactDeadLetter},
			{"exhausted trips and parks (the mover moves it after the grace)", call(classify.Exhausted, 0, fb), ReactTrip},
			{"ambiguous spent: dead letter, never resent elsewhere", call(classify.Ambiguous, 5, fb), ReactDeadLetter},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				rx := After(tt.in)
				require.Equal(t, tt.want, rx.Kind, "%s", rx)
				if rx.Kind == ReactFallback {
					require.Equal(t, OutcomeFailed, rx.Outcome)
					o := rx.Fallback.Otherwise
					require.Equal(t, ReactDeadLetter, o.Kind, "refused by fallback_max_share: dead-lettered as without a fallback")
					require.Equal(t, ReasonRetriesExhausted, o.Reason)
					require.Equal(t, OutcomeFailed, o.Outcome)
				}
			})
		}
	})
}
