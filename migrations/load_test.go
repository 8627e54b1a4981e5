package migrations

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestLoadRejectsGapsDuplicatesAndBadNames(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	_, err := load(fstest.MapFS{"001_a.sql": file("SELECT 1"), "003_c.sql": file("SELECT 1")})
	require.ErrorContains(t, err, "version 002 missing")
	_, err = load(fstest.MapFS{"001_a.sql": file("SELECT 1"), "001_b.sql": file("SELECT 1")})
	require.ErrorContains(t, err, "appears twice")
	_, err = load(fstest.MapFS{"1_a.sql": file("SELECT 1")})
	require.ErrorContains(t, err, "NNN_name.sql")
	all, err := All()
	require.NoError(t, err)
	require.NotEmpty(t, all)
	for i, m := range all {
		require.Equal(t, i+1, m.Version)
	}
}
