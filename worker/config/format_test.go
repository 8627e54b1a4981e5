package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKeyFormat(t *testing.T) {
	t.Parallel()
	withKey := func(vendor, extra string) string {
		s := strings.Replace(minimal, `vendor = "openai"`, `vendor = "`+vendor+`"`, 1)
		return strings.Replace(s, `api_key_env = "OPENAI_API_KEY"`, `api_key_env = "OPENAI_API_KEY"`+"\n"+extra, 1)
	}
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, FormatVendor, cfg.Keys[0].Format, "default: the vendor's own")
	require.False(t, cfg.Keys[0].Responses())

	cfg, err = Parse([]byte(withKey("openai", `format = "responses"`)), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, FormatResponses, cfg.Keys[0].Format)
	require.True(t, cfg.Keys[0].Responses())

	for _, ok := range []struct{ vendor, format string }{{"groq", "chat_completions"}, {"anthropic", "messages"}, {"openai", "chat_completions"}} {
		_, err := Parse([]byte(withKey(ok.vendor, `format = "`+ok.format+`"`)), "triage.toml")
		require.NoError(t, err, ok)
	}

	// The file's line of the setting is named (line 7 of minimal with the
	// setting inserted after api_key_env).
	for _, tc := range []struct{ vendor, extra, want string }{
		{"anthropic", `format = "responses"`, `triage.toml:7: keys[0] "main": format = "responses" (the OpenAI Responses API) needs vendor "openai"; vendor "anthropic" does not speak it`},
		{"azure-openai", `format = "responses"`, `triage.toml:7: keys[0] "main": format = "responses" (the OpenAI Responses API) needs vendor "openai"; vendor "azure-openai"`},
		{"groq", `format = "messages"`, `triage.toml:7: keys[0] "main": format = "messages" is Anthropic's`},
		{"anthropic", `format = "chat_completions"`, `triage.toml:7: keys[0] "main": format = "chat_completions" is not vendor "anthropic"'s format`},
		{"openai", `format = "completions"`, `triage.toml:7: keys[0] "main": format "completions" is not one of: chat_completions, messages, responses`},
		{"openai", "format = \"responses\"\nambiguous = \"lookup\"", `keys[0] "main": ambiguous = "lookup" finds stored chat completions; format = "responses" has no look-up by metadata`},
	} {
		_, err := Parse([]byte(withKey(tc.vendor, tc.extra)), "triage.toml")
		require.ErrorContains(t, err, tc.want, tc.extra)
	}
}

func TestKeyBackground(t *testing.T) {
	t.Parallel()
	withKey := func(extra string) string {
		return strings.Replace(minimal, `api_key_env = "OPENAI_API_KEY"`, `api_key_env = "OPENAI_API_KEY"`+"\n"+extra, 1)
	}
	cfg, err := Parse([]byte(withKey("format = \"responses\"\nbackground = true")), "triage.toml")
	require.NoError(t, err)
	require.True(t, cfg.Keys[0].Background)
	_, err = Parse([]byte(withKey("background = true")), "triage.toml")
	require.ErrorContains(t, err, `keys[0] "main": background = true is the Responses API's background mode: it needs format = "responses"`)
}

// The Responses API refuses max_output_tokens below 16: a pipeline on a
// responses key with a smaller max_tokens would dead-letter every record
// with a 400, so the configuration is refused, naming the pipeline.
func TestResponsesKeyRefusesMaxTokensBelow16(t *testing.T) {
	t.Parallel()
	cfg := strings.Replace(minimal, `api_key_env = "OPENAI_API_KEY"`, `api_key_env = "OPENAI_API_KEY"`+"\nformat = \"responses\"", 1)
	_, err := Parse([]byte(cfg+"max_tokens = 16\n"), "triage.toml")
	require.NoError(t, err)
	_, err = Parse([]byte(cfg+"max_tokens = 8\n"), "triage.toml")
	require.ErrorContains(t, err, `pipelines[0] "enrich": max_tokens 8 is below the Responses API's minimum max_output_tokens of 16 (model "gpt-4o-mini" is on key "main", format = "responses")`)
	// Other formats take it.
	_, err = Parse([]byte(minimal+"max_tokens = 8\n"), "triage.toml")
	require.NoError(t, err)
}
