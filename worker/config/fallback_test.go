package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const withFallbackModel = minimal + `
[[models]]
name = "backup"
key = "main"
context_tokens = 8000
max_output_tokens = 2048
json_mode = true
`

func TestFallbackSettings(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	p := cfg.Pipelines[0]
	require.Empty(t, p.Fallback)
	require.Zero(t, p.FallbackMaxShare, "default: no bound")
	require.Equal(t, FallbackGraceDefault, p.FallbackGrace)
	require.False(t, cfg.Models[0].JSONMode, "json_mode is not assumed")

	text := withFallbackModel + "\n[[pipelines]]\nname = \"fb\"\nmodel = \"gpt-4o-mini\"\nprompt = \"p\"\n" +
		"fallback = [\"backup\"]\nfallback_max_share = 0.2\nfallback_grace = \"5s\"\n"
	cfg, err = Parse([]byte(text), "triage.toml")
	require.NoError(t, err)
	p = cfg.Pipelines[1]
	require.Equal(t, []string{"backup"}, p.Fallback)
	require.Equal(t, 0.2, p.FallbackMaxShare)
	require.Equal(t, 5*time.Second, p.FallbackGrace)
	fbs := cfg.Fallbacks(&p)
	require.Len(t, fbs, 1)
	require.Equal(t, 2048, fbs[0].MaxOutputTokens)
	require.True(t, fbs[0].JSONMode)
}

func TestFallbackValidation(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, add, want string }{
		{"unknown model", `fallback = ["gpt-9"]`, `triage.toml: pipelines[0] "enrich": fallback "gpt-9" is not a [[models]] name`},
		{"own model", `fallback = ["gpt-4o-mini"]`, `triage.toml: pipelines[0] "enrich": fallback "gpt-4o-mini" is the pipeline's own model`},
		{"twice", `fallback = ["backup", "backup"]`, `triage.toml: pipelines[0] "enrich": fallback "backup" is listed twice`},
		{"share over 1", `fallback_max_share = 1.5`, `triage.toml: pipelines[0] "enrich": fallback_max_share must be between 0 (no bound) and 1, got 1.5`},
		{"share negative", `fallback_max_share = -0.1`, `fallback_max_share must be between 0 (no bound) and 1`},
		{"json pipeline, no json_mode", `fallback = ["plain"]`, `triage.toml: pipelines[0] "enrich": fallback "plain" can serve no record of an output = "json" pipeline: set json_mode = true on [[models]] "plain"`},
		{"grace form", `fallback_grace = "soon"`, `triage.toml: pipelines[0] "enrich": fallback_grace "soon": not a duration`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The pipeline table is minimal's last one: lines appended belong to it.
			_, err := Parse([]byte(minimalThenBackup()+tc.add+"\n"), "triage.toml")
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := Parse([]byte(withFallbackModel+"[[pipelines]]\nname = \"x\"\nmodel = \"gpt-4o-mini\"\nprompt = \"p\"\n[[models]]\nname = \"m2\"\nkey = \"main\"\nmax_output_tokens = -1\n"), "triage.toml")
	require.ErrorContains(t, err, `triage.toml: models[2] "m2": max_output_tokens must be 0 (unknown) or positive, got -1`)
}

// minimalThenBackup is minimal with the "backup" model defined before its
// pipeline table, so lines appended go to the pipeline.
func minimalThenBackup() string {
	return `
[[keys]]
name = "main"
vendor = "openai"
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_API_KEY"

[[models]]
name = "gpt-4o-mini"
key = "main"

[[models]]
name = "backup"
key = "main"
json_mode = true

[[models]]
name = "plain"
key = "main"

[[pipelines]]
name = "enrich"
model = "gpt-4o-mini"
prompt = "Record: {{json .}}"
`
}
