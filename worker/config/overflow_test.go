package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOnOverflow(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, OverflowDeadLetter, cfg.Pipelines[0].OnOverflow, "default: data is never changed silently")

	cfg, err = Parse([]byte(minimal+`on_overflow = "truncate"`+"\n"), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, OverflowTruncate, cfg.Pipelines[0].OnOverflow)

	_, err = Parse([]byte(minimal+`on_overflow = "shorten"`+"\n"), "triage.toml")
	require.ErrorContains(t, err, `triage.toml: pipelines[0] "enrich": on_overflow "shorten" is not one of: dead_letter, truncate`)
}
