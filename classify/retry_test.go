package classify

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTextWait(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		msg  string
		want float64
		ok   bool
	}{
		{"please try again in 20s.", 20, true},
		{"please try again in 7m12s. visit", 432, true},
		{"please try again in 1m0.363142857s.", 60.363142857, true},
		{"please try again in 644ms.", 0.644, true},
		{"please retry in 36.429760048s.", 36.429760048, true},
		{"please retry after 2 seconds.", 2, true},
		{"please retry after 86400 seconds. please go here", 86400, true},
		{"try again in 1.5 seconds", 1.5, true},
		{"the limit resets after 5s", 5, true},
		{"try again in 2 hours", 7200, true},
		{"retry in 3 days", 259200, true},
		{"please try again later.", 0, false},
		{"retry after 2 weeks", 0, false},
		{"try again in 5 minutesish", 0, false},
		{"rate limit reached", 0, false},
	} {
		got, ok := textWait(tt.msg)
		require.Equal(t, tt.ok, ok, tt.msg)
		require.InDelta(t, tt.want, got, 1e-9, tt.msg)
	}
}

func TestWaitsFromText(t *testing.T) {
	t.Parallel()
	obs := func(vendor string, status int, h map[string]string, body string) Observation {
		return Observation{Vendor: vendor, Path: PathDirect, Phase: PhaseResponse, Status: status, Headers: h, Body: body}
	}
	openai := `{"error":{"message":"Rate limit reached for gpt-4o on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`

	v := Classify(obs("openai", 429, nil, openai))
	require.Equal(t, Throttled, v.Class)
	require.Equal(t, 20.0, *v.RetryAfterS, "the wait in the message text")

	v = Classify(obs("openai", 429, map[string]string{"retry-after": "3"}, openai))
	require.Equal(t, 3.0, *v.RetryAfterS, "a header wait comes first")

	long := `{"error":{"message":"Rate limit reached. Please try again in 2 hours.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	v = Classify(obs("openai", 429, nil, long))
	require.Equal(t, Exhausted, v.Class, "a wait of hours is a quota window")
	require.Equal(t, "rate_limit+long_wait", v.Reason)
	require.Equal(t, 7200.0, *v.RetryAfterS)

	v = Classify(obs("anthropic", 429, map[string]string{"retry-after": "86400"}, `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}`))
	require.Equal(t, Exhausted, v.Class, "a structured wait of a day too")

	v = Classify(obs("openai", 400, nil, `{"error":{"message":"Invalid value. Please try again in 20s.","type":"invalid_request_error","param":null,"code":null}}`))
	require.Nil(t, v.RetryAfterS, "a rejected request reports no wait")
}
