package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStreamOptions(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(minimal+"stream = true\n"), "triage.toml")
	require.NoError(t, err)
	p, err := cfg.Pipeline("enrich")
	require.NoError(t, err)
	require.True(t, p.Stream)
	require.Equal(t, StreamIdleTimeoutDefault, p.StreamIdleTimeout, "the default applies to a streaming pipeline")
	require.Zero(t, p.AcceptPartialMinChars)

	cfg, err = Parse([]byte(minimal+"output = \"text\"\nstream = true\nstream_idle_timeout = \"5s\"\naccept_partial_min_chars = 200\n"), "triage.toml")
	require.NoError(t, err)
	p, err = cfg.Pipeline("enrich")
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, p.StreamIdleTimeout)
	require.Equal(t, 200, p.AcceptPartialMinChars)

	cfg, err = Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	p, err = cfg.Pipeline("enrich")
	require.NoError(t, err)
	require.False(t, p.Stream)
	require.Zero(t, p.StreamIdleTimeout, "no idle timeout without a stream")

	short := strings.Replace(minimal, `api_key_env = "OPENAI_API_KEY"`, "api_key_env = \"OPENAI_API_KEY\"\ntimeout = \"10s\"", 1)
	cfg, err = Parse([]byte(short+"stream = true\n"), "triage.toml")
	require.NoError(t, err)
	p, err = cfg.Pipeline("enrich")
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, p.StreamIdleTimeout, "the default is at most half a short key timeout")
	require.Equal(t, StreamMaxDefault, p.StreamMax, "a streamed call's ceiling")
	k, err := cfg.Key(cfg.Keys[0].Name)
	require.NoError(t, err)
	require.Equal(t, StreamMaxDefault, cfg.CallMax(k), "the key's longest call is its streams' ceiling")

	cfg, err = Parse([]byte(short+"stream = true\nstream_max = \"90s\"\n"), "triage.toml")
	require.NoError(t, err)
	p, err = cfg.Pipeline("enrich")
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, p.StreamMax)
	k, err = cfg.Key(cfg.Keys[0].Name)
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, cfg.CallMax(k))

	cfg, err = Parse([]byte(short), "triage.toml")
	require.NoError(t, err)
	k, err = cfg.Key(cfg.Keys[0].Name)
	require.NoError(t, err)
	require.Equal(t, 10*time.Second, cfg.CallMax(k), "no stream: the key's timeout")
}

func TestStreamOptionErrors(t *testing.T) {
	t.Parallel()
	at := `triage.toml: pipelines[0] "enrich": `
	for _, tc := range []struct{ name, extra, want string }{
		{"idle timeout without a stream", "stream_idle_timeout = \"5s\"\n", at + "stream_idle_timeout needs stream = true"},
		{"negative idle timeout", "stream = true\nstream_idle_timeout = \"-5s\"\n", at + `stream_idle_timeout "-5s": must be positive`},
		{"idle timeout not a duration", "stream = true\nstream_idle_timeout = \"soon\"\n", at + `stream_idle_timeout "soon"`},
		{"accept partial without a stream", "output = \"text\"\naccept_partial_min_chars = 10\n", at + "accept_partial_min_chars needs stream = true"},
		{"accept partial on json", "stream = true\naccept_partial_min_chars = 10\n", at + `accept_partial_min_chars needs output = "text"`},
		{"idle timeout not below the call timeout", "stream = true\nstream_idle_timeout = \"60s\"\n",
			at + "stream_idle_timeout 1m0s must be shorter than the key's timeout 1m0s"},
		{"ceiling without a stream", "stream_max = \"5m\"\n", at + "stream_max needs stream = true"},
		{"negative ceiling", "stream = true\nstream_max = \"-5m\"\n", at + `stream_max "-5m": must be positive`},
		{"ceiling below the call timeout", "stream = true\nstream_idle_timeout = \"5s\"\nstream_max = \"30s\"\n",
			at + "stream_max 30s must not be shorter than the key's timeout 1m0s"},
		{"negative accept partial", "output = \"text\"\nstream = true\naccept_partial_min_chars = -1\n", at + "accept_partial_min_chars must be 0"},
	} {
		_, err := Parse([]byte(minimal+tc.extra), "triage.toml")
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.want, tc.name)
	}
}
