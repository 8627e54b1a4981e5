package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetention(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, Retention{Age: 30 * 24 * time.Hour, DeadLetterAge: 90 * 24 * time.Hour, Interval: time.Hour}, cfg.Retention)

	cfg, err = Parse([]byte("[retention]\nage = \"7d\"\ndead_letter_age = \"720h\"\ninterval = \"10m\"\n"+minimal), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, Retention{Age: 7 * 24 * time.Hour, DeadLetterAge: 720 * time.Hour, Interval: 10 * time.Minute}, cfg.Retention)

	cfg, err = Parse([]byte("[retention]\noff = true\n"+minimal), "triage.toml")
	require.NoError(t, err)
	require.True(t, cfg.Retention.Off)

	for in, want := range map[string]string{
		`age = "soon"`:          `triage.toml: retention: age "soon": not a duration`,
		`age = "0s"`:            `triage.toml: retention: age "0s": must be positive`,
		`age = "5m"`:            `triage.toml: retention: age must be at least 1h0m0s`,
		`dead_letter_age = "x"`: `triage.toml: retention: dead_letter_age "x": not a duration`,
		`interval = "1s"`:       `triage.toml: retention: interval must be at least 1m`,
		`keep = "forever"`:      `keep`,
	} {
		_, err := Parse([]byte("[retention]\n"+in+"\n"+minimal), "triage.toml")
		require.ErrorContains(t, err, want, in)
	}
}

func TestFetchCooldown(t *testing.T) {
	t.Parallel()
	for c, want := range map[int]time.Duration{1: 100 * time.Millisecond, 8: 12500 * time.Microsecond, 16: 6250 * time.Microsecond, 50: 2 * time.Millisecond, 500: 2 * time.Millisecond, 0: 100 * time.Millisecond} {
		require.Equal(t, want, FetchCooldownFor(c), c)
	}
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, FetchCooldownFor(cfg.Keys[0].Concurrency), cfg.Keys[0].FetchCooldown)

	withKey := func(line string) string {
		return strings.Replace(minimal, `api_key_env = "OPENAI_API_KEY"`, `api_key_env = "OPENAI_API_KEY"`+"\n"+line, 1)
	}
	cfg, err = Parse([]byte(withKey(`fetch_cooldown = "3ms"`)), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, 3*time.Millisecond, cfg.Keys[0].FetchCooldown)
	for in, want := range map[string]string{
		`fetch_cooldown = "500us"`: `fetch_cooldown must be between 1ms and 1s, got 500µs`,
		`fetch_cooldown = "2s"`:    `fetch_cooldown must be between 1ms and 1s, got 2s`,
		`fetch_cooldown = "fast"`:  `fetch_cooldown "fast"`,
	} {
		_, err := Parse([]byte(withKey(in)), "triage.toml")
		require.ErrorContains(t, err, want, in)
	}
}
