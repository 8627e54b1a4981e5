package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
)

const ruleKey = `
[[keys]]
name = "main"
vendor = "other"
base_url = "https://llm.example/v1"
api_key_env = "K"

[[models]]
name = "m"
key = "main"

[[pipelines]]
name = "p"
model = "m"
prompt = "x"
`

func TestRulesBuildTheClassifier(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(ruleKey+`
[[rules]]
vendor = "other"
status = 418
message_regex = "(?i)teapot"
class = "exhausted"
reason = "teapot_quota"
retry_after_s = 30
`), "triage.toml")
	require.NoError(t, err)
	require.Len(t, cfg.Rules, 1)
	v := cfg.Classifier().Classify(classify.Observation{Vendor: "other", Phase: classify.PhaseResponse, Status: 418,
		Body: `{"error":{"message":"I am a TEAPOT"}}`})
	require.Equal(t, classify.Exhausted, v.Class)
	require.Equal(t, "teapot_quota", v.Reason)
	require.Equal(t, "user/rules[0]", v.Rule)
	require.Equal(t, 30.0, *v.RetryAfterS)

	cfg, err = Parse([]byte(ruleKey), "triage.toml")
	require.NoError(t, err)
	require.Nil(t, cfg.Classifier(), "no rules: the built-in classifier")
}

func TestRulesValidationNamesTheField(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ rule, want string }{
		{"status = 400\nclass = \"retryable\"\nreason = \"x\"", `triage.toml: rules[0].class: "retryable" is not a class`},
		{"status = 400\nreason = \"x\"", `triage.toml: rules[0].class: is required`},
		{"status = 400\nclass = \"ok\"\nreason = \"x\"", `triage.toml: rules[0].class: "ok" is not a class`},
		{"status = 400\nclass = \"rejected\"", `triage.toml: rules[0].reason: is required`},
		{"message_regex = \"(\"\nclass = \"rejected\"\nreason = \"x\"", `triage.toml: rules[0].message_regex: "(" does not compile`},
		{"class = \"rejected\"\nreason = \"x\"", `triage.toml: rules[0].match: set at least one of`},
		{"status = 42\nclass = \"rejected\"\nreason = \"x\"", `triage.toml: rules[0].status: 42 is not an HTTP status`},
		{"vendor = \"nope\"\nclass = \"rejected\"\nreason = \"x\"", `triage.toml: rules[0].vendor: "nope" is not one of`},
		{"status = 400\nclass = \"rejected\"\nreason = \"Bad Reason\"", `triage.toml: rules[0].reason: "Bad Reason" must be`},
		{"status = 400\nclass = \"rejected\"\nreason = \"x\"\nretry_after_s = -1", `triage.toml: rules[0].retry_after_s: must be 0 or more`},
		{"status = 400\nclas = \"rejected\"\nreason = \"x\"", `triage.toml: rules[0]: unknown key "clas"`},
	} {
		_, err := Parse([]byte(ruleKey+"\n[[rules]]\n"+tt.rule+"\n"), "triage.toml")
		require.Error(t, err, tt.rule)
		require.True(t, strings.Contains(err.Error(), tt.want), "%s\ngot: %v", tt.rule, err)
	}
}
