package classify

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUserRulesComeFirst(t *testing.T) {
	t.Parallel()
	// A body the built-in table calls rejected (unknown 4xx), which an
	// operator knows to be a prepaid balance running out.
	o := Observation{Vendor: "other", Path: PathDirect, Phase: PhaseResponse, Status: 418,
		Body: `{"error":{"message":"Account balance is in arrears (code 7001)","type":"billing","code":"arrears"}}`}
	require.Equal(t, Rejected, Classify(o).Class)

	wait := 120.0
	c, err := NewClassifier([]UserRule{
		{Name: "rules[0]", Vendor: "openai", Class: Throttled, Reason: "never_here"},
		{Name: "rules[1]", Status: 418, Code: "ARREARS", Message: "in ARREARS", Class: Exhausted, Reason: "arrears", RetryAfterS: &wait},
	})
	require.NoError(t, err)
	v := c.Classify(o)
	require.Equal(t, Exhausted, v.Class)
	require.Equal(t, "arrears", v.Reason)
	require.True(t, v.Known)
	require.Equal(t, "user/rules[1]", v.Rule)
	require.Equal(t, 120.0, *v.RetryAfterS)
	require.Equal(t, "arrears", *v.Code)

	e := c.Explain(o)
	require.Equal(t, "user", e.Kind)
	require.Contains(t, e.String(), "rules[1] (user rule from triage.toml")

	// A user rule beats a built-in row too.
	c, err = NewClassifier([]UserRule{{Name: "rules[0]", Vendor: "anthropic", MessageRegex: regexp.MustCompile(`(?i)credit balance`), Class: Rejected, Reason: "my_reason"}})
	require.NoError(t, err)
	v = c.Classify(Observation{Vendor: "anthropic", Phase: PhaseResponse, Status: 400,
		Body: `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low"}}`})
	require.Equal(t, Rejected, v.Class)
	require.Equal(t, "my_reason", v.Reason)
}

func TestNewClassifierNamesTheBadField(t *testing.T) {
	t.Parallel()
	neg := -1.0
	for _, tt := range []struct {
		r    UserRule
		want string
	}{
		{UserRule{Name: "rules[0]", Class: Exhausted, Reason: "x"}, "rules[0].match: set at least one of"},
		{UserRule{Name: "rules[1]", Status: 42, Class: Exhausted, Reason: "x"}, "rules[1].status: 42 is not an HTTP status"},
		{UserRule{Name: "rules[2]", Vendor: "nope", Class: Exhausted, Reason: "x"}, `rules[2].vendor: "nope" is not one of`},
		{UserRule{Name: "rules[3]", Status: 400, Class: OK, Reason: "x"}, "rules[3].class: must be one of"},
		{UserRule{Name: "rules[4]", Status: 400, Class: Exhausted, Reason: "Bad Reason"}, `rules[4].reason: "Bad Reason" must be`},
		{UserRule{Name: "rules[5]", Status: 400, Class: Exhausted, Reason: "x", RetryAfterS: &neg}, "rules[5].retry_after_s: must be 0 or more"},
	} {
		_, err := NewClassifier([]UserRule{tt.r})
		require.ErrorIs(t, err, ErrInvalidRule)
		require.ErrorContains(t, err, tt.want)
	}
}

func TestExplain(t *testing.T) {
	t.Parallel()
	e := Explain(Observation{Vendor: "anthropic", Phase: PhaseResponse, Status: 400,
		Body: `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`})
	require.Equal(t, "built-in", e.Kind)
	require.Equal(t, "anthropic/credit_balance_too_low", e.Rule)
	require.Equal(t, "classify/testdata/anthropic/credit_balance_too_low_400.json", e.Fixture)

	e = Explain(Observation{Vendor: "openai", Phase: PhaseResponse, Status: 418, Body: `teapot`})
	require.Equal(t, "default", e.Kind)
	require.Equal(t, "default/unknown_4xx", e.Rule)
	require.Equal(t, []string{"wrapped", "model", "signal/model", "request", "openai", "signal", "generic"}, e.Tables)
	require.Contains(t, e.String(), "no row of the tables wrapped, model, signal/model, request, openai, signal, generic matched")

	e = Explain(Observation{Vendor: "openrouter", Phase: PhaseResponse, Status: 200,
		Body: `{"error":{"message":"x","code":404}}`})
	require.Equal(t, "model/model_unavailable", e.Rule)
	require.Contains(t, e.String(), "inside a 200 body")
}
