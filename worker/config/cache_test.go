package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCacheOptions(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	p, err := cfg.Pipeline("enrich")
	require.NoError(t, err)
	require.False(t, p.Cache, "off by default")
	require.Equal(t, CacheTTLDefault, p.CacheTTL)
	require.Equal(t, 30*24*time.Hour, CacheTTLDefault)

	for _, tc := range []struct {
		ttl  string
		want time.Duration
	}{{`"30d"`, 30 * 24 * time.Hour}, {`"1d"`, 24 * time.Hour}, {`"90m"`, 90 * time.Minute}} {
		cfg, err := Parse([]byte(minimal+"cache = true\ncache_ttl = "+tc.ttl+"\n"), "triage.toml")
		require.NoError(t, err, tc.ttl)
		p, err := cfg.Pipeline("enrich")
		require.NoError(t, err)
		require.True(t, p.Cache)
		require.Equal(t, tc.want, p.CacheTTL, tc.ttl)
	}

	for ttl, want := range map[string]string{
		`"0s"`:     `triage.toml: pipelines[0] "enrich": cache_ttl "0s": must be positive`,
		`"-1h"`:    `triage.toml: pipelines[0] "enrich": cache_ttl "-1h": must be positive`,
		`"soon"`:   `triage.toml: pipelines[0] "enrich": cache_ttl "soon": not a duration`,
		`"xd"`:     `triage.toml: pipelines[0] "enrich": cache_ttl "xd": not a duration`,
		`"thirty"`: `triage.toml: pipelines[0] "enrich": cache_ttl "thirty": not a duration`,
	} {
		_, err := Parse([]byte(minimal+"cache = true\ncache_ttl = "+ttl+"\n"), "triage.toml")
		require.ErrorContains(t, err, want, ttl)
	}
}
