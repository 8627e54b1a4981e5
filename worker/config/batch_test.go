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
