package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
)

// minimal is the smallest valid file; cases below append to or replace it.
const minimal = `
[[keys]]
name = "main"
vendor = "openai"
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_API_KEY"

[[models]]
name = "gpt-4o-mini"
key = "main"

[[pipelines]]
name = "enrich"
model = "gpt-4o-mini"
prompt = "Record: {{json .}}"
`

func TestLoadExample(t *testing.T) {
	t.Parallel()
	cfg, err := Load("testdata/triage.toml")
	require.NoError(t, err)

	require.Len(t, cfg.Keys, 2)
	main := cfg.Keys[0]
	require.Equal(t, "main", main.Name)
	require.Equal(t, "openai", main.Vendor)
	require.Equal(t, classify.PathDirect, main.Path)
	require.Equal(t, 8, main.Concurrency)
	require.Equal(t, 60*time.Second, main.Timeout)
	require.Equal(t, 0.2, main.RetryBudget)
	require.Equal(t, 12500*time.Microsecond, main.FetchCooldown)
	require.Equal(t, Retention{Age: RetentionAgeDefault, DeadLetterAge: RetentionDeadLetterAgeDefault, Interval: RetentionIntervalDefault}, cfg.Retention)

	claude, err := cfg.Key("claude")
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, claude.Timeout)
	require.Equal(t, ProbeIntervalDefault, claude.ProbeInterval)
	require.Equal(t, PathDefault, claude.Path)
	require.Equal(t, 4, claude.Concurrency)
	require.Equal(t, 50.0, claude.PrepaidUSD)

	sum, err := cfg.Pipeline("summarize")
	require.NoError(t, err)
	require.Equal(t, OutputText, sum.Output)
	require.Equal(t, MaxAttemptsDefault, sum.MaxAttempts)
	require.Equal(t, MaxTokensDefault, sum.MaxTokens)
	require.Equal(t, MaxSnoozesDefault, sum.MaxSnoozes)
	require.Equal(t, 0, sum.AmbiguousRetries, "explicit 0 is kept")
	require.NotNil(t, sum.Temperature)
	require.Equal(t, 0.0, *sum.Temperature)

	enrich, err := cfg.Pipeline("enrich")
	require.NoError(t, err)
	require.Nil(t, enrich.Temperature)
	require.Equal(t, 1, enrich.AmbiguousRetries)

	k, m, err := cfg.KeyFor("summarize")
	require.NoError(t, err)
	require.Equal(t, "claude", k.Name)
	require.Equal(t, "claude-haiku-4-5", m.Name)
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	k := cfg.Keys[0]
	require.Equal(t, PathDefault, k.Path)
	require.Equal(t, ConcurrencyDefault, k.Concurrency)
	require.Equal(t, TimeoutDefault, k.Timeout)
	require.Equal(t, ProbeIntervalDefault, k.ProbeInterval)
	require.Equal(t, RetryBudgetDefault, k.RetryBudget)
	p := cfg.Pipelines[0]
	require.Equal(t, OutputDefault, p.Output)
	require.Equal(t, MaxAttemptsDefault, p.MaxAttempts)
	require.Equal(t, MaxTokensDefault, p.MaxTokens)
	require.Equal(t, AmbiguousRetriesDefault, p.AmbiguousRetries)
	require.Equal(t, MaxSnoozesDefault, p.MaxSnoozes)
	require.Nil(t, p.Temperature)

	// WithDefaults is idempotent and keeps explicit zeros read from the file.
	cfg2, err := Parse([]byte(strings.Replace(minimal, `api_key_env = "OPENAI_API_KEY"`,
		`api_key_env = "OPENAI_API_KEY"`+"\nretry_budget = 0", 1)+"ambiguous_retries = 0\n"), "triage.toml")
	require.NoError(t, err)
	again := cfg2.WithDefaults().WithDefaults()
	require.Equal(t, 0.0, again.Keys[0].RetryBudget)
	require.Equal(t, 0, again.Pipelines[0].AmbiguousRetries)
	require.NoError(t, again.Validate())

	// A Config built in Go gets every default.
	built := (&Config{Keys: []Key{{Name: "k"}}, Pipelines: []Pipeline{{Name: "p"}}}).WithDefaults()
	require.Equal(t, RetryBudgetDefault, built.Keys[0].RetryBudget)
	require.Equal(t, AmbiguousRetriesDefault, built.Pipelines[0].AmbiguousRetries)
}

func TestStormSettings(t *testing.T) {
	t.Parallel()
	key := func(lines string) string {
		return strings.Replace(minimal, `api_key_env = "OPENAI_API_KEY"`, `api_key_env = "OPENAI_API_KEY"`+"\n"+lines, 1)
	}
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	k := cfg.Keys[0]
	require.Zero(t, k.StormFailures, "unset: the storm breaker's defaults apply")
	require.Zero(t, k.StormProbeMax)

	cfg, err = Parse([]byte(key("storm_failures = 0\nstorm_share = 0.25\nstorm_probe_min = \"500ms\"\nstorm_probe_max = \"30s\"\nstorm_alert_after = \"10m\"")), "triage.toml")
	require.NoError(t, err)
	k = cfg.Keys[0]
	require.Equal(t, -1, k.StormFailures, "0 in the file: off")
	require.Equal(t, 0.25, k.StormShare)
	require.Equal(t, 500*time.Millisecond, k.StormProbeMin)
	require.Equal(t, 30*time.Second, k.StormProbeMax)
	require.Equal(t, 10*time.Minute, k.StormAlertAfter)

	_, err = Parse([]byte(key(`storm_probe_min = "1m"`+"\n"+`storm_probe_max = "10s"`)), "triage.toml")
	require.ErrorContains(t, err, "storm_probe_max")
	_, err = Parse([]byte(key("storm_share = 1.5")), "triage.toml")
	require.ErrorContains(t, err, "storm_share")
	_, err = Parse([]byte(key(`storm_window = "soon"`)), "triage.toml")
	require.ErrorContains(t, err, "storm_window")
}

func TestSnoozeLimitAlias(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(minimal+"snooze_limit = 7\n"), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, 7, cfg.Pipelines[0].MaxSnoozes)

	_, err = Parse([]byte(minimal+"snooze_limit = 7\nmax_snoozes = 8\n"), "triage.toml")
	require.ErrorContains(t, err, `triage.toml: pipelines[0] "enrich": max_snoozes and snooze_limit are the same setting`)
}

// TestValidationErrors feeds one mistake per case and checks the error names
// the element and the field.
func TestValidationErrors(t *testing.T) {
	t.Parallel()
	rep := func(old, new string) string { return strings.Replace(minimal, old, new, 1) }
	addKey := func(s string) string {
		return rep(`api_key_env = "OPENAI_API_KEY"`, `api_key_env = "OPENAI_API_KEY"`+"\n"+s)
	}
	addModel := func(s string) string { return rep(`key = "main"`, `key = "main"`+"\n"+s) }
	addPipe := func(s string) string { return minimal + s + "\n" }

	cases := []struct {
		name, toml, want string
	}{
		{"syntax", minimal + "[[keys]\n", "triage.toml: toml:"},
		{"unknown top-level key", minimal + "[server]\nport = 1\n", "triage.toml: unknown key \"server\"\ntriage.toml: unknown key \"server.port\""},
		{"unknown key in keys", addKey(`timout = "5s"`), `triage.toml: keys[0] "main": unknown key "timout"`},
		{"unknown key in pipelines", minimal + "[[pipelines]]\nname = \"x\"\nmodel = \"gpt-4o-mini\"\nprompt = \"p\"\ntemprature = 0.5\n", `triage.toml: pipelines[1] "x": unknown key "temprature"`},
		{"unknown key in database", "[database]\nurl = \"\"\nuser = \"x\"\n" + minimal, `triage.toml: unknown key "database.user"`},
		{"wrong type", addKey(`concurrency = "eight"`), "triage.toml: toml: line"},

		{"database url scheme", "[database]\nurl = \"mysql://x/y\"\n" + minimal, `triage.toml: database: url must be a postgres:// or postgresql:// URL`},
		{"webhook url", "[alerts]\nwebhook_url = \"ftp://hooks\"\n" + minimal, `triage.toml: alerts: webhook_url "ftp://hooks" must be an http or https URL`},
		{"max_usd_per_hour", "[alerts]\nmax_usd_per_hour = -1\n" + minimal, `triage.toml: alerts: max_usd_per_hour must be 0 (off) or positive, got -1`},

		{"key name missing", rep(`name = "main"`, ``), `triage.toml: keys[0]: name is required`},
		{"key name invalid", rep(`name = "main"`+"\n", `name = "Main Key"`+"\n"), `triage.toml: keys[0] "Main Key": name must be lower-case letters and digits`},
		{"key name duplicate", minimal + "[[keys]]\nname = \"main\"\nvendor = \"openai\"\nbase_url = \"http://x\"\napi_key_env = \"K\"\n", `triage.toml: keys[1] "main": name duplicates keys[0]`},
		{"vendor missing", rep(`vendor = "openai"`, ``), `triage.toml: keys[0] "main": vendor is required, one of: openai, anthropic`},
		{"vendor unknown", rep(`vendor = "openai"`, `vendor = "opanai"`), `triage.toml: keys[0] "main": vendor "opanai" is not one of: openai, anthropic`},
		{"path", addKey(`path = "proxy"`), `triage.toml: keys[0] "main": path "proxy" is not one of: direct, router, gateway`},
		{"base_url missing", rep(`base_url = "https://api.openai.com/v1"`, ``), `triage.toml: keys[0] "main": base_url is required`},
		{"base_url scheme", rep(`base_url = "https://api.openai.com/v1"`, `base_url = "api.openai.com/v1"`), `triage.toml: keys[0] "main": base_url "api.openai.com/v1" must be an http or https URL with a host`},
		{"api_key_env missing", rep(`api_key_env = "OPENAI_API_KEY"`, ``), `triage.toml: keys[0] "main": api_key_env is required`},
		{"api_key_env holds a key", rep(`api_key_env = "OPENAI_API_KEY"`, `api_key_env = "sk-proj-abc-123"`), `triage.toml: keys[0] "main": api_key_env must name an environment variable`},
		{"concurrency", addKey(`concurrency = -2`), `triage.toml: keys[0] "main": concurrency must be at least 1, got -2`},
		{"rpm zero", addKey(`rpm = 0`), `triage.toml: keys[0] "main": rpm must be a positive number per minute (leave it out when the limit is unknown), got 0`},
		{"tpm negative", addKey(`tpm = -5`), `triage.toml: keys[0] "main": tpm must be a positive number per minute (leave it out when the limit is unknown), got -5`},
		{"timeout form", addKey(`timeout = "60"`), `triage.toml: keys[0] "main": timeout "60": not a duration like "60s"`},
		{"timeout negative", addKey(`timeout = "-5s"`), `triage.toml: keys[0] "main": timeout "-5s": must be positive`},
		{"probe_interval", addKey(`probe_interval = "soon"`), `triage.toml: keys[0] "main": probe_interval "soon": not a duration`},
		{"prepaid", addKey(`prepaid_usd = -10.0`), `triage.toml: keys[0] "main": prepaid_usd must be 0 (off) or positive, got -10`},
		{"retry_budget", addKey(`retry_budget = 1.5`), `triage.toml: keys[0] "main": retry_budget must be between 0 and 1 (a share of first attempts), got 1.5`},
		{"retry_budget nan", addKey(`retry_budget = nan`), `triage.toml: keys[0] "main": retry_budget must be between 0 and 1`},

		{"model name missing", rep(`name = "gpt-4o-mini"`, ``), `triage.toml: models[0]: name is required`},
		{"model duplicate", minimal + "[[models]]\nname = \"gpt-4o-mini\"\nkey = \"main\"\n", `triage.toml: models[1] "gpt-4o-mini": name duplicates models[0]`},
		{"model key missing", rep(`key = "main"`, ``), `triage.toml: models[0] "gpt-4o-mini": key is required`},
		{"model key undefined", rep(`key = "main"`, `key = "backup"`), `triage.toml: models[0] "gpt-4o-mini": key "backup" is not defined in [[keys]]`},
		{"context_tokens", addModel(`context_tokens = -1`), `triage.toml: models[0] "gpt-4o-mini": context_tokens must be 0 (unknown) or positive, got -1`},
		{"input price", addModel(`input_usd_per_mtok = -0.1`), `triage.toml: models[0] "gpt-4o-mini": input_usd_per_mtok must not be negative`},
		{"output price", addModel(`output_usd_per_mtok = inf`), `triage.toml: models[0] "gpt-4o-mini": output_usd_per_mtok must not be negative, got +Inf`},

		{"pipeline name missing", rep(`name = "enrich"`, ``), `triage.toml: pipelines[0]: name is required`},
		{"pipeline duplicate", minimal + "[[pipelines]]\nname = \"enrich\"\nmodel = \"gpt-4o-mini\"\nprompt = \"x\"\n", `triage.toml: pipelines[1] "enrich": name duplicates pipelines[0]`},
		{"pipeline model missing", rep(`model = "gpt-4o-mini"`, ``), `triage.toml: pipelines[0] "enrich": model is required`},
		{"pipeline model undefined", minimal + "[[pipelines]]\nname = \"extract\"\nmodel = \"gpt-5\"\nprompt = \"x\"\n", `triage.toml: pipelines[1] "extract": model "gpt-5" is not defined in [[models]]`},
		{"prompt missing", rep(`prompt = "Record: {{json .}}"`, ``), `triage.toml: pipelines[0] "enrich": prompt is required`},
		{"prompt template", rep(`prompt = "Record: {{json .}}"`, `prompt = "Record: {{json .}"`), `triage.toml: pipelines[0] "enrich": prompt is not a valid text/template`},
		{"prompt unknown func", rep(`prompt = "Record: {{json .}}"`, `prompt = "Record: {{yaml .}}"`), `function "yaml" not defined`},
		{"output", addPipe(`output = "xml"`), `triage.toml: pipelines[0] "enrich": output "xml" is not one of: json, json_schema, text`},
		{"max_attempts", addPipe(`max_attempts = -1`), `triage.toml: pipelines[0] "enrich": max_attempts must be at least 1, got -1`},
		{"budget", addPipe(`budget_usd = -5.0`), `triage.toml: pipelines[0] "enrich": budget_usd must be 0 (no cap) or positive, got -5`},
		{"max_tokens", addPipe(`max_tokens = -3`), `triage.toml: pipelines[0] "enrich": max_tokens must be at least 1, got -3`},
		{"max_tokens over context", addModel(`context_tokens = 1000`), `triage.toml: pipelines[0] "enrich": max_tokens 1024 does not fit model "gpt-4o-mini"'s context of 1000 tokens`},
		{"temperature", addPipe(`temperature = 3.5`), `triage.toml: pipelines[0] "enrich": temperature must be between 0 and 2, got 3.5`},
		{"ambiguous_retries", addPipe(`ambiguous_retries = -1`), `triage.toml: pipelines[0] "enrich": ambiguous_retries must be 0 or more, got -1`},
		{"max_snoozes", addPipe(`max_snoozes = 0`), `triage.toml: pipelines[0] "enrich": max_snoozes must be at least 1, got 0`},
		{"snooze_limit", addPipe(`snooze_limit = -4`), `triage.toml: pipelines[0] "enrich": snooze_limit must be at least 1, got -4`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.toml), "triage.toml")
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	bad := strings.Replace(minimal, `vendor = "openai"`, `vendor = "nope"`, 1) + "output = \"xml\"\n"
	_, err := Parse([]byte(bad), "prod.toml")
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 2)
	for _, l := range lines {
		require.True(t, strings.HasPrefix(l, "prod.toml: "), l)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "missing.toml"))
	require.ErrorIs(t, err, os.ErrNotExist)

	path := filepath.Join(t.TempDir(), "custom.toml")
	require.NoError(t, os.WriteFile(path, []byte(minimal+"max_tokens = -1\n"), 0o600))
	_, err = Load(path)
	require.ErrorContains(t, err, `custom.toml: pipelines[0] "enrich": max_tokens must be at least 1`)
}

// A 0 written in the file is refused, naming the field; leaving the line
// out still takes the default.
func TestZeroConcurrencyAndAttemptsRefused(t *testing.T) {
	t.Parallel()
	withKey := strings.Replace(minimal, `api_key_env = "OPENAI_API_KEY"`, "api_key_env = \"OPENAI_API_KEY\"\nconcurrency = 0", 1)
	_, err := Parse([]byte(withKey), "triage.toml")
	require.EqualError(t, err, `triage.toml: keys[0] "main": concurrency must be at least 1, got 0`)
	for _, v := range []string{"0", "-2"} {
		_, err = Parse([]byte(minimal+"max_attempts = "+v+"\n"), "triage.toml")
		require.EqualError(t, err, `triage.toml: pipelines[0] "enrich": max_attempts must be at least 1, got `+v)
	}
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, ConcurrencyDefault, cfg.Keys[0].Concurrency)
	require.Equal(t, MaxAttemptsDefault, cfg.Pipelines[0].MaxAttempts)
}

func TestLookups(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)

	_, err = cfg.Pipeline("nope")
	require.ErrorIs(t, err, ErrNotDefined)
	require.EqualError(t, err, `triage.toml: pipeline "nope" is not defined in [[pipelines]] (defined: enrich)`)
	_, err = cfg.Model("gpt-5")
	require.ErrorIs(t, err, ErrNotDefined)
	require.ErrorContains(t, err, `model "gpt-5" is not defined in [[models]] (defined: gpt-4o-mini)`)
	_, err = cfg.Key("backup")
	require.ErrorContains(t, err, `key "backup" is not defined in [[keys]] (defined: main)`)
	_, _, err = cfg.KeyFor("nope")
	require.ErrorIs(t, err, ErrNotDefined)

	k, m, err := cfg.KeyFor("enrich")
	require.NoError(t, err)
	require.Equal(t, "main", k.Name)
	require.Equal(t, "gpt-4o-mini", m.Name)
}

func TestAPIKey(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	k, err := cfg.Key("main")
	require.NoError(t, err)

	const secret = "sk-test-SECRET-value"
	env := map[string]string{"OPENAI_API_KEY": " " + secret + "\n"}
	got, err := k.APIKey(func(n string) string { return env[n] })
	require.NoError(t, err)
	require.Equal(t, secret, got)
	require.NotContains(t, k.String(), secret)
	require.Contains(t, k.String(), "OPENAI_API_KEY")

	_, err = k.APIKey(func(string) string { return "" })
	require.ErrorIs(t, err, ErrAPIKeyUnset)
	require.EqualError(t, err, `key "main": API key environment variable is not set: set OPENAI_API_KEY (named by api_key_env)`)
}

func TestDatabaseURL(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte("[database]\nurl = \"postgres://file/db\"\n"+minimal), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, "postgres://file/db", cfg.DatabaseURL(func(string) string { return "" }))
	require.Equal(t, "postgres://env/db", cfg.DatabaseURL(func(n string) string {
		if n == EnvDatabaseURL {
			return "postgres://env/db"
		}
		return ""
	}))

	empty, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, "", empty.DatabaseURL(func(string) string { return "" }))
}

func TestRender(t *testing.T) {
	t.Parallel()
	cfg, err := Load("testdata/triage.toml")
	require.NoError(t, err)

	enrich, err := cfg.Pipeline("enrich")
	require.NoError(t, err)
	out, err := enrich.Render(map[string]any{"id": "r1", "name": "<Ada & Bob>", "n": 3})
	require.NoError(t, err)
	require.Equal(t, `Record: {"id":"r1","n":3,"name":"<Ada & Bob>"}`, out)

	sum, err := cfg.Pipeline("summarize")
	require.NoError(t, err)
	out, err = sum.Render(map[string]any{"text": "hello"})
	require.NoError(t, err)
	require.Equal(t, "Summarize in one sentence: hello", out)

	_, err = sum.Render(map[string]any{"body": "a secret value"})
	require.ErrorIs(t, err, ErrRender)
	require.Contains(t, err.Error(), `pipeline "summarize"`)
	require.Contains(t, err.Error(), `no entry for key "text"`)
	require.NotContains(t, err.Error(), "a secret value")

	// A Pipeline built in Go renders without Validate.
	p := Pipeline{Name: "adhoc", Prompt: "{{.a}}-{{json .b}}"}
	out, err = p.Render(map[string]any{"a": 1, "b": []int{2}})
	require.NoError(t, err)
	require.Equal(t, "1-[2]", out)
	_, err = (&Pipeline{Name: "broken", Prompt: "{{"}).Render(nil)
	require.ErrorIs(t, err, ErrRender)
}

func TestErrorsAreJoinable(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(strings.Replace(minimal, `key = "main"`, `key = "x"`, 1)), "triage.toml")
	require.Error(t, err)
	var joined interface{ Unwrap() []error }
	require.True(t, errors.As(err, &joined))
}

func TestVendorsMatchClassifier(t *testing.T) {
	t.Parallel()
	for _, v := range Vendors() {
		require.True(t, classify.KnownVendor(v), v)
	}
	require.ElementsMatch(t, classify.Vendors(), Vendors())
}

func TestSafetyNetSettings(t *testing.T) {
	t.Parallel()
	key := func(lines string) string {
		return strings.Replace(minimal, `api_key_env = "OPENAI_API_KEY"`, `api_key_env = "OPENAI_API_KEY"`+"\n"+lines, 1)
	}
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	require.Zero(t, cfg.Keys[0].SuspectRejections, "unset: the safety net's defaults apply")
	require.Zero(t, cfg.Keys[0].ThrottleHoldAfter)

	cfg, err = Parse([]byte(key("suspect_rejections = 5\nthrottle_hold_after = \"30s\"")), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, 5, cfg.Keys[0].SuspectRejections)
	require.Equal(t, 30*time.Second, cfg.Keys[0].ThrottleHoldAfter)

	cfg, err = Parse([]byte(key("suspect_rejections = 0\nthrottle_hold_after = \"0s\"")), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, -1, cfg.Keys[0].SuspectRejections, "0 in the file: off")
	require.Equal(t, time.Duration(-1), cfg.Keys[0].ThrottleHoldAfter, "0s in the file: off")

	for _, tc := range []struct{ lines, want string }{
		{"suspect_rejections = 1", `triage.toml: keys[0] "main": suspect_rejections must be 0 (off) or at least 2 (one rejected record is the record's problem), got 1`},
		{"suspect_rejections = -3", `suspect_rejections must be 0 (off) or at least 2`},
		{`throttle_hold_after = "-1s"`, `triage.toml: keys[0] "main": throttle_hold_after must be "0s" (off) or positive, got "-1s"`},
		{`throttle_hold_after = "soon"`, `throttle_hold_after "soon"`},
	} {
		_, err := Parse([]byte(key(tc.lines)), "triage.toml")
		require.ErrorContains(t, err, tc.want, tc.lines)
	}
}

// A Config built in Go with a negative storm wait is refused with the
// key's name, not run as the default (a file cannot hold one: its
// durations must be positive).
func TestValidateRefusesNegativeStormWaits(t *testing.T) {
	t.Parallel()
	for _, field := range []string{"window", "probe_min", "probe_max"} {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(minimal), "triage.toml")
			require.NoError(t, err)
			k := &cfg.Keys[0]
			switch field {
			case "window":
				k.StormWindow = -time.Second
			case "probe_min":
				k.StormProbeMin = -time.Second
			case "probe_max":
				k.StormProbeMax = -time.Second
			}
			require.ErrorContains(t, cfg.Validate(), `keys[0] "main": storm_window, storm_probe_min and storm_probe_max must not be negative`)
		})
	}
	for _, tc := range []struct {
		name string
		set  func(k *Key)
	}{
		{"storm_alert_after", func(k *Key) { k.StormAlertAfter = -time.Minute }},
		{"batch_gather", func(k *Key) { k.BatchGather = -time.Minute }},
		{"batch_poll_min", func(k *Key) { k.BatchPollMin = -time.Minute }},
		{"batch_poll_max", func(k *Key) { k.BatchPollMax = -time.Minute }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(minimal), "triage.toml")
			require.NoError(t, err)
			tc.set(&cfg.Keys[0])
			require.ErrorContains(t, cfg.Validate(), `keys[0] "main": `+tc.name+` must not be negative, got -1m0s`)
		})
	}
}
