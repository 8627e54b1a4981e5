package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBatchModeOptions(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	p, err := cfg.Pipeline("enrich")
	require.NoError(t, err)
	require.Equal(t, ModeSync, p.Mode, "sync unless asked")
	require.False(t, p.UsesBatch())
	require.Zero(t, p.AutoMargin)

	priced := strings.Replace(minimal, `key = "main"`, "key = \"main\"\ninput_usd_per_mtok = 0.15\noutput_usd_per_mtok = 0.60", 1)
	cfg, err = Parse([]byte(priced+"mode = \"auto\"\n"), "triage.toml")
	require.NoError(t, err)
	p, err = cfg.Pipeline("enrich")
	require.NoError(t, err)
	require.Equal(t, ModeAuto, p.Mode)
	require.True(t, p.UsesBatch())
	require.Equal(t, AutoMarginDefault, p.AutoMargin)
	m, err := cfg.Model("gpt-4o-mini")
	require.NoError(t, err)
	in, out := m.BatchPrices()
	require.InDelta(t, 0.075, in, 1e-12, "half the sync input price by default")
	require.InDelta(t, 0.30, out, 1e-12, "half the sync output price by default")

	own := strings.Replace(priced, `output_usd_per_mtok = 0.60`, "output_usd_per_mtok = 0.60\nbatch_input_usd_per_mtok = 0.1\nbatch_output_usd_per_mtok = 0.2", 1)
	cfg, err = Parse([]byte(own+"mode = \"batch\"\n"), "triage.toml")
	require.NoError(t, err)
	m, err = cfg.Model("gpt-4o-mini")
	require.NoError(t, err)
	in, out = m.BatchPrices()
	require.Equal(t, 0.1, in)
	require.Equal(t, 0.2, out)

	cfg, err = Parse([]byte(minimal+"mode = \"auto\"\nauto_margin = \"90m\"\n"), "triage.toml")
	require.NoError(t, err)
	p, err = cfg.Pipeline("enrich")
	require.NoError(t, err)
	require.Equal(t, 90*time.Minute, p.AutoMargin)
}

func TestBatchModeOptionErrors(t *testing.T) {
	t.Parallel()
	gemini := strings.Replace(minimal, `vendor = "openai"`, `vendor = "gemini"`, 1)
	for name, tc := range map[string]struct{ toml, want string }{
		"unknown mode":          {minimal + "mode = \"overnight\"\n", `pipelines[0] "enrich": mode "overnight" is not one of: sync, batch, auto`},
		"margin without auto":   {minimal + "mode = \"batch\"\nauto_margin = \"1h\"\n", `auto_margin needs mode = "auto"`},
		"bad margin":            {minimal + "mode = \"auto\"\nauto_margin = \"soon\"\n", `auto_margin "soon"`},
		"stream in batch":       {minimal + "mode = \"batch\"\nstream = true\n", `stream = true needs mode = "sync"`},
		"vendor without batch":  {gemini + "mode = \"batch\"\n", `key "main" (vendor "gemini", serving model "gpt-4o-mini") does not have`},
		"negative batch price":  {strings.Replace(minimal, `key = "main"`, "key = \"main\"\nbatch_input_usd_per_mtok = -1", 1), `batch_input_usd_per_mtok must not be negative`},
		"auto stream":           {minimal + "mode = \"auto\"\nstream = true\n", `stream = true needs mode = "sync"`},
		"unknown key is listed": {minimal + "mode = \"batch\"\nbatch_size = 3\n", `unknown key "batch_size"`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.toml), "triage.toml")
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.True(t, strings.HasPrefix(err.Error(), "triage.toml: "), err.Error())
		})
	}
}

// A key's batch submitter timing is read from the file; unset it is zero
// (the worker's options, then the submitter's defaults); a bad value or an
// inverted backoff names the setting.
func TestBatchSubmitterTiming(t *testing.T) {
	t.Parallel()
	key := func(lines string) string {
		return strings.Replace(minimal, `api_key_env = "OPENAI_API_KEY"`, `api_key_env = "OPENAI_API_KEY"`+"\n"+lines, 1)
	}
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	require.Zero(t, cfg.Keys[0].BatchGather)
	require.Zero(t, cfg.Keys[0].BatchPollMin)
	require.Zero(t, cfg.Keys[0].BatchPollMax)

	cfg, err = Parse([]byte(key("batch_gather = \"2s\"\nbatch_poll_min = \"1s\"\nbatch_poll_max = \"5s\"")), "triage.toml")
	require.NoError(t, err)
	k := cfg.Keys[0]
	require.Equal(t, 2*time.Second, k.BatchGather)
	require.Equal(t, time.Second, k.BatchPollMin)
	require.Equal(t, 5*time.Second, k.BatchPollMax)

	_, err = Parse([]byte(key(`batch_gather = "soon"`)), "triage.toml")
	require.ErrorContains(t, err, `keys[0] "main": batch_gather "soon"`)
	_, err = Parse([]byte(key(`batch_poll_min = "0s"`)), "triage.toml")
	require.ErrorContains(t, err, `batch_poll_min "0s": must be positive`)
	_, err = Parse([]byte(key("batch_poll_min = \"1m\"\nbatch_poll_max = \"10s\"")), "triage.toml")
	require.ErrorContains(t, err, "batch_poll_max (10s) must not be shorter than batch_poll_min (1m0s)")
}
