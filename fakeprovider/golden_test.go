package fakeprovider_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// mask blanks what differs between two real calls (ids, numbers, model names,
// the key), so what is left must match the captured body byte for byte:
// wording, field order, indentation.
func mask(s string) string {
	for _, r := range []struct{ re, with string }{
		{`req_[0-9A-Za-z]+`, "REQ"},
		{`org-[0-9A-Za-z]+`, "ORG"},
		{`\([0-9a-f]{8}-[0-9a-f-]{27}\)`, "(ORG)"},
		{`request ID [0-9a-f]{32}`, "request ID REQ"},
		{`sk-[0-9A-Za-z*-]+`, "KEY"},
		{`(gpt|o4|claude)-[0-9A-Za-z.-]+`, "MODEL"},
		{`-?[0-9][0-9,]*(\.[0-9]+)?(ms|s)?`, "N"},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.with)
	}
	return s
}

func TestBodiesMatchCapturedVendorBodies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		vendor, fixture string
		step            fakeprovider.Step
		status          int
		rate            *fakeprovider.RateLimit // drive a real bucket instead of a script
	}{
		{"openai", "insufficient_quota_429.json", fakeprovider.Step{Action: fakeprovider.ActionExhausted}, 429, nil},
		{"openai", "rate_limit_exceeded_429.json", fakeprovider.Step{}, 429, &fakeprovider.RateLimit{TokensPerMinute: 40}},
		{"openai", "request_too_large_429.json", fakeprovider.Step{Action: fakeprovider.ActionTooLarge}, 429, nil},
		{"openai", "context_length_exceeded_400.json", fakeprovider.Step{Action: fakeprovider.ActionContextLength}, 400, nil},
		{"openai", "invalid_api_key_401.json", fakeprovider.Step{Action: fakeprovider.ActionUnauthorized}, 401, nil},
		{"openai", "server_error_500.json", fakeprovider.Step{Action: fakeprovider.ActionServerError}, 500, nil},
		{"openai", "overloaded_503.json", fakeprovider.Step{Action: fakeprovider.ActionOverloaded}, 503, nil},
		{"openai", "invalid_prompt_400.json", fakeprovider.Step{Action: fakeprovider.ActionPolicy}, 400, nil},
		{"openai", "integer_below_min_value_400.json", fakeprovider.Step{Action: fakeprovider.ActionInvalidParam}, 400, nil},
		{"anthropic", "rate_limit_error_429.json", fakeprovider.Step{Action: fakeprovider.ActionRateLimit}, 429, nil},
		{"anthropic", "overloaded_error_529.json", fakeprovider.Step{Action: fakeprovider.ActionOverloaded}, 529, nil},
		{"anthropic", "credit_balance_400.json", fakeprovider.Step{Action: fakeprovider.ActionExhausted}, 400, nil},
		{"anthropic", "prompt_too_long_400.json", fakeprovider.Step{Action: fakeprovider.ActionContextLength}, 400, nil},
		{"anthropic", "authentication_error_401.json", fakeprovider.Step{Action: fakeprovider.ActionUnauthorized}, 401, nil},
		{"anthropic", "max_tokens_400.json", fakeprovider.Step{Action: fakeprovider.ActionInvalidParam}, 400, nil},
	}
	for _, c := range cases {
		t.Run(c.vendor+"/"+c.fixture, func(t *testing.T) {
			t.Parallel()
			want, err := os.ReadFile(filepath.Join("testdata", c.vendor, c.fixture))
			require.NoError(t, err)
			sc := fakeprovider.Scenario{Script: []fakeprovider.Step{c.step}}
			if c.rate != nil {
				sc = fakeprovider.Scenario{RateLimit: c.rate}
			}
			b := setup(t, sc)
			if c.rate != nil {
				r, err := b.post(t, ctxT(t), c.vendor, rawBody(c.vendor, "a", false), nil)
				require.NoError(t, err)
				require.Equal(t, 200, r.status, "the first call empties the bucket")
			}
			r, err := b.post(t, ctxT(t), c.vendor, rawBody(c.vendor, "a", false), nil)
			require.NoError(t, err)
			require.Equal(t, c.status, r.status)
			require.Equal(t, "application/json", r.header.Get("Content-Type"))
			require.Equal(t, mask(string(want)), mask(r.body))
		})
	}
}

// The captured stream-error events: OpenAI's data-only error after normal
// chunks, Anthropic's named error event.
func TestStreamErrorEvents(t *testing.T) {
	t.Parallel()
	for vendor, want := range map[string]string{
		"openai":    "data: {\"error\":{\"message\":\"The server had an error while processing your request. Sorry about that!\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n",
		"anthropic": "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"},\"request_id\":\"REQ\"}\n\n",
	} {
		b := setup(t, fakeprovider.Scenario{Script: []fakeprovider.Step{{Action: fakeprovider.ActionStreamError, Chunks: 1}}})
		r, err := b.post(t, ctxT(t), vendor, rawBody(vendor, "a", true), nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.status)
		require.Equal(t, "text/event-stream; charset=utf-8", r.header.Get("Content-Type"))
		require.Regexp(t, regexp.QuoteMeta(mask(want))+`$`, mask(r.body))
		require.NotContains(t, r.body, "[DONE]")
		require.NotContains(t, r.body, "message_stop")
	}
}
