package provider

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseRateLimit(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 15, 14, 23, 0, 0, time.UTC)
	unknown := RateWindow{Remaining: -1}
	tests := []struct {
		name    string
		vendor  string
		headers map[string]string
		want    RateLimit
	}{
		{
			// The sample values of OpenAI's "Rate limits in headers" table
			// (platform.openai.com/docs/guides/rate-limits).
			name:   "openai docs sample",
			vendor: "openai",
			headers: map[string]string{
				"x-ratelimit-limit-requests": "60", "x-ratelimit-limit-tokens": "150000",
				"x-ratelimit-remaining-requests": "59", "x-ratelimit-remaining-tokens": "149984",
				"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s",
			},
			want: RateLimit{
				Requests:    RateWindow{Limit: 60, Remaining: 59, Reset: time.Second, Per: time.Minute},
				Tokens:      RateWindow{Limit: 150000, Remaining: 149984, Reset: 6 * time.Minute, Per: time.Minute},
				InputTokens: unknown, OutputTokens: unknown,
			},
		},
		{
			// Captured from a chat completion (community.openai.com thread
			// "How to get rate limit reset time for response API?").
			name:   "openai millisecond resets",
			vendor: "openai",
			headers: map[string]string{
				"x-ratelimit-limit-requests": "5000", "x-ratelimit-remaining-requests": "4999", "x-ratelimit-reset-requests": "12ms",
				"x-ratelimit-limit-tokens": "160000", "x-ratelimit-remaining-tokens": "159976", "x-ratelimit-reset-tokens": "9ms",
			},
			want: RateLimit{
				Requests:    RateWindow{Limit: 5000, Remaining: 4999, Reset: 12 * time.Millisecond, Per: time.Minute},
				Tokens:      RateWindow{Limit: 160000, Remaining: 159976, Reset: 9 * time.Millisecond, Per: time.Minute},
				InputTokens: unknown, OutputTokens: unknown,
			},
		},
		{
			name:   "fractional seconds",
			vendor: "azure-openai",
			headers: map[string]string{
				"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5s",
			},
			want: RateLimit{
				Requests: RateWindow{Limit: 100, Remaining: 0, Reset: 1500 * time.Millisecond, Per: time.Minute},
				Tokens:   unknown, InputTokens: unknown, OutputTokens: unknown,
			},
		},
		{
			// Azure OpenAI's Responses API answering "unknown"
			// (openai/openai-dotnet#838): no limit learned.
			name:   "azure minus one",
			vendor: "azure-openai",
			headers: map[string]string{
				"x-ratelimit-limit-tokens": "-1", "x-ratelimit-remaining-tokens": "-1", "x-ratelimit-reset-tokens": "0",
			},
			want: RateLimit{Requests: unknown, Tokens: unknown, InputTokens: unknown, OutputTokens: unknown},
		},
		{
			// Groq: the request limit is per day, the token limit per minute
			// (console.groq.com/docs/rate-limits).
			name:   "groq requests per day",
			vendor: "groq",
			headers: map[string]string{
				"x-ratelimit-limit-requests": "14400", "x-ratelimit-remaining-requests": "14370", "x-ratelimit-reset-requests": "2m59.56s",
				"x-ratelimit-limit-tokens": "18000", "x-ratelimit-remaining-tokens": "17997", "x-ratelimit-reset-tokens": "7.66s",
			},
			want: RateLimit{
				Requests:    RateWindow{Limit: 14400, Remaining: 14370, Reset: 2*time.Minute + 59560*time.Millisecond, Per: 24 * time.Hour},
				Tokens:      RateWindow{Limit: 18000, Remaining: 17997, Reset: 7660 * time.Millisecond, Per: time.Minute},
				InputTokens: unknown, OutputTokens: unknown,
			},
		},
		{
			// The header set of Anthropic's "Response headers" table
			// (docs.claude.com/en/api/rate-limits): RFC 3339 resets.
			name:   "anthropic",
			vendor: "anthropic",
			headers: map[string]string{
				"anthropic-ratelimit-requests-limit": "4000", "anthropic-ratelimit-requests-remaining": "3201",
				"anthropic-ratelimit-requests-reset": "2025-01-15T14:24:00Z",
				"anthropic-ratelimit-tokens-limit":   "400000", "anthropic-ratelimit-tokens-remaining": "312000",
				"anthropic-ratelimit-tokens-reset":       "2025-01-15T14:23:15Z",
				"anthropic-ratelimit-input-tokens-limit": "400000", "anthropic-ratelimit-input-tokens-remaining": "312000",
				"anthropic-ratelimit-input-tokens-reset":  "2025-01-15T14:23:15Z",
				"anthropic-ratelimit-output-tokens-limit": "80000", "anthropic-ratelimit-output-tokens-remaining": "80000",
				"anthropic-ratelimit-output-tokens-reset": "2025-01-15T14:23:00Z",
			},
			want: RateLimit{
				Requests:     RateWindow{Limit: 4000, Remaining: 3201, Reset: time.Minute, Per: time.Minute},
				Tokens:       RateWindow{Limit: 400000, Remaining: 312000, Reset: 15 * time.Second, Per: time.Minute},
				InputTokens:  RateWindow{Limit: 400000, Remaining: 312000, Reset: 15 * time.Second, Per: time.Minute},
				OutputTokens: RateWindow{Limit: 80000, Remaining: 80000, Per: time.Minute},
			},
		},
		{
			name:   "anthropic reset unreadable",
			vendor: "anthropic",
			headers: map[string]string{
				"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "x",
				"anthropic-ratelimit-requests-reset": "in a minute",
			},
			want: RateLimit{Requests: RateWindow{Limit: 50, Remaining: -1, Per: time.Minute}, Tokens: unknown, InputTokens: unknown, OutputTokens: unknown},
		},
		{
			// Many OpenAI-compatible servers send no such header at all.
			name:    "none",
			vendor:  "vllm",
			headers: map[string]string{"content-type": "application/json"},
			want:    RateLimit{Requests: unknown, Tokens: unknown, InputTokens: unknown, OutputTokens: unknown},
		},
		{
			// OpenAI's names on an Anthropic key are not Anthropic's headers.
			name:    "wrong family",
			vendor:  "anthropic",
			headers: map[string]string{"x-ratelimit-limit-requests": "60"},
			want:    RateLimit{Requests: unknown, Tokens: unknown, InputTokens: unknown, OutputTokens: unknown},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := ParseRateLimit(tt.vendor, tt.headers, now)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestRateLimitTokenWindow(t *testing.T) {
	t.Parallel()
	rl := ParseRateLimit("anthropic", map[string]string{
		"anthropic-ratelimit-tokens-limit": "90000", "anthropic-ratelimit-input-tokens-limit": "60000",
	}, time.Now())
	require.EqualValues(t, 60000, rl.TokenWindow().Limit, "the input-token limit binds the input sent")
	require.InDelta(t, 1000, rl.TokenWindow().PerSecond(), 1e-9)
	require.True(t, rl.Known())
	require.False(t, rl.Requests.Empty())

	rl = ParseRateLimit("openai", map[string]string{"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "0"}, time.Now())
	require.True(t, rl.Requests.Empty())
	require.InDelta(t, 1, rl.Requests.PerSecond(), 1e-9)
}
