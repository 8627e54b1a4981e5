package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
)

// TestDecideBeforeCacheHit pins where a response-cache hit sits among the
// checks before a call: after the breakers and the dead-letter and
// stored-result checks, before anything that would call or give up.
func TestDecideBeforeCacheHit(t *testing.T) {
	t.Parallel()
	allowed := &keys.Admission{Allowed: true, State: keys.StateClosed}
	with := func(f func(b *before)) before {
		b := job()
		f(&b)
		return b
	}
	hit := func(p ledger.Prior) func(b *before) {
		return func(b *before) { b.Admission, b.Prior, b.CacheHit = allowed, &p, true }
	}
	tests := []struct {
		name string
		in   before
		want Reaction
	}{
		{"a stored answer: complete from the cache", with(hit(ledger.Prior{})), Reaction{Kind: ReactCacheHit}},
		{"no stored answer: call", with(func(b *before) { b.Admission, b.Prior = allowed, &ledger.Prior{} }), Reaction{Kind: ReactGo}},
		{"dead-lettered already: cancel, not answered", with(hit(ledger.Prior{DeadLettered: true})), Reaction{Kind: ReactCancel}},
		{"own result stored: complete without a second result", with(hit(ledger.Prior{OKAttemptID: 3, ResultStored: true})),
			Reaction{Kind: ReactComplete}},
		{"own sends got no answer: the stored one beats dead-lettering", with(hit(ledger.Prior{JobAmbiguous: 2})),
			Reaction{Kind: ReactCacheHit}},
		{"own calls used up: the stored one beats dead-lettering", with(hit(ledger.Prior{JobCalls: 6})),
			Reaction{Kind: ReactCacheHit}},
		{"over the retry budget: no call needed", with(func(b *before) {
			hit(ledger.Prior{JobLast: ledger.LastAttempt{Seen: true, Class: classify.Transient}})(b)
			b.OverRetryBudget, b.RetryDefer = true, time.Second
		}), Reaction{Kind: ReactCacheHit}},
		{"batch at its spend cap: a $0 answer still lands", with(func(b *before) {
			hit(ledger.Prior{})(b)
			b.Budget, b.BudgetRecheck = &ledger.BudgetError{Paused: true}, 30*time.Second
		}), Reaction{Kind: ReactCacheHit}},
		{"breaker open: the job parks with the key's queue", with(func(b *before) {
			hit(ledger.Prior{})(b)
			b.Admission = &keys.Admission{Wait: 30 * time.Second, State: keys.StateOpen}
		}), Reaction{Kind: ReactPark, After: breakerPark}},
		{"worker errors used up the runs: still dead-lettered first", with(func(b *before) {
			hit(ledger.Prior{})(b)
			b.Attempt = 7
		}), Reaction{Kind: ReactDeadLetter, Class: classify.Transient, Reason: ReasonWorkerErrors}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := decideBefore(tt.in)
			got.Detail = ""
			require.Equal(t, tt.want, got)
		})
	}
	require.Equal(t, "cache_hit", ReactCacheHit.String())
	require.Equal(t, "cache_hit", Reaction{Kind: ReactCacheHit}.String())
}

func TestCacheKey(t *testing.T) {
	t.Parallel()
	k := cacheKey("openai", "abc")
	require.Len(t, k, 64)
	require.Equal(t, k, cacheKey("openai", "abc"), "stable")
	require.NotEqual(t, k, cacheKey("anthropic", "abc"), "the vendor is part of it")
	require.NotEqual(t, k, cacheKey("openai", "abd"), "the request is part of it")
	require.NotEqual(t, cacheKey("ab", "c"), cacheKey("a", "bc"), "no collision by concatenation")
}
