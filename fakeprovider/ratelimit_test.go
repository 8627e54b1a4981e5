package fakeprovider_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/provider"
)

func lowered(h map[string][]string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	return out
}

// Every reply of a rate-limited scenario carries the vendor's rate-limit
// headers in the vendor's shapes (OpenAI: Go durations; Anthropic: RFC 3339
// instants), successes included; a small burst empties the bucket quickly.
func TestRateLimitHeadersOnEveryReply(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{RateLimit: &fakeprovider.RateLimit{RequestsPerMinute: 600, BurstRequests: 3, TokensPerMinute: 60000}})
	ctx := ctxT(t)
	for i := range 3 {
		r, err := b.post(t, ctx, "openai", rawBody("openai", "a", false), nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.status)
		rl := provider.ParseRateLimit("openai", lowered(r.header), b.clock.Now())
		require.EqualValues(t, 600, rl.Requests.Limit, "the limit is per minute, not the burst")
		require.EqualValues(t, 2-i, rl.Requests.Remaining)
		require.Equal(t, time.Duration(i+1)*100*time.Millisecond, rl.Requests.Reset, "a request comes back every 100 ms")
		require.EqualValues(t, 60000, rl.Tokens.Limit)
		require.Equal(t, (time.Duration(i+1) * 100 * time.Millisecond).String(), r.header.Get("x-ratelimit-reset-requests"))
	}
	r, err := b.post(t, ctx, "openai", rawBody("openai", "a", false), nil)
	require.NoError(t, err)
	require.Equal(t, 429, r.status, "the burst of 3 is spent")
	require.Equal(t, "100", r.header.Get("retry-after-ms"))
	require.Equal(t, "0", r.header.Get("x-ratelimit-remaining-requests"))

	b.clock.Advance(time.Second)
	r, err = b.post(t, ctx, "anthropic", rawBody("anthropic", "a", false), nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.status)
	require.Equal(t, "2026-03-01T12:00:01Z", r.header.Get("anthropic-ratelimit-requests-reset"))
	rl := provider.ParseRateLimit("anthropic", lowered(r.header), b.clock.Now())
	require.EqualValues(t, 600, rl.Requests.Limit)
	require.EqualValues(t, 2, rl.Requests.Remaining)
	require.EqualValues(t, 60000, rl.InputTokens.Limit)
	require.EqualValues(t, 60000, rl.Tokens.Limit)
}

// Many OpenAI-compatible servers send no rate-limit headers: no_headers
// turns them off; a 429 still names its wait.
func TestRateLimitNoHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{RateLimit: &fakeprovider.RateLimit{RequestsPerMinute: 60, BurstRequests: 1, NoHeaders: true}})
	ctx := ctxT(t)
	for _, want := range []int{200, 429} {
		for _, vendor := range []string{"openai", "anthropic"} {
			if want == 200 && vendor == "anthropic" {
				continue
			}
			r, err := b.post(t, ctx, vendor, rawBody(vendor, "a", false), nil)
			require.NoError(t, err)
			require.Equal(t, want, r.status)
			for k := range r.header {
				require.NotContains(t, strings.ToLower(k), "ratelimit", "%s %d sent %s", vendor, want, k)
			}
			require.False(t, provider.ParseRateLimit(vendor, lowered(r.header), b.clock.Now()).Known())
			if want == 429 {
				require.Equal(t, "1", r.header.Get("retry-after"))
			}
		}
	}
}

// A tokens-per-minute limit refuses by input tokens, with its own burst.
func TestTokensPerMinuteBurst(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{RateLimit: &fakeprovider.RateLimit{TokensPerMinute: 60000, BurstTokens: 40}})
	ctx := ctxT(t)
	r, err := b.post(t, ctx, "openai", rawBody("openai", "a", false), nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.status)
	rl := provider.ParseRateLimit("openai", lowered(r.header), b.clock.Now())
	require.EqualValues(t, 60000, rl.Tokens.Limit)
	used := 40 - rl.Tokens.Remaining
	require.Positive(t, used)
	for rl.Tokens.Remaining >= used {
		r, err = b.post(t, ctx, "openai", rawBody("openai", "a", false), nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.status)
		rl = provider.ParseRateLimit("openai", lowered(r.header), b.clock.Now())
	}
	r, err = b.post(t, ctx, "openai", rawBody("openai", "a", false), nil)
	require.NoError(t, err)
	require.Equal(t, 429, r.status)
	require.Contains(t, r.body, "tokens per min (TPM)")
}
