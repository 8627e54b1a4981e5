package pgcluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func noPath(string) (string, error) { return "", errors.New("not on PATH") }

func TestFindBinariesNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	_, err := findBinaries(noPath, filepath.Join(t.TempDir(), "*", "bin"))
	require.ErrorIs(t, err, ErrNoBinaries)
	require.Contains(t, err.Error(), "initdb")
	require.Contains(t, err.Error(), "apt-get install postgresql", "the message says how to get them")
}

func TestFindBinariesPrefersNewestVersion(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, v := range []string{"9.6", "15", "16"} {
		bin := filepath.Join(root, v, "bin")
		require.NoError(t, os.MkdirAll(bin, 0o755))
		for _, name := range []string{"initdb", "pg_ctl"} {
			if v == "16" && name == "pg_ctl" {
				continue // an incomplete install is skipped
			}
			require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755))
		}
	}
	dir, err := findBinaries(noPath, filepath.Join(root, "*", "bin"))
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(dir, filepath.Join("15", "bin")), dir)
}
