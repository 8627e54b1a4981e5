package migrations

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestLoadRejectsDuplicatesAndBadNames(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	got, err := load(fstest.MapFS{"001_a.sql": file("SELECT 1"), "003_c.sql": file("SELECT 1")})
	require.NoError(t, err, "a number held by a branch not merged yet may be missing")
	require.Equal(t, []int{1, 3}, []int{got[0].Version, got[1].Version})
	_, err = load(fstest.MapFS{"000_a.sql": file("SELECT 1")})
	require.ErrorContains(t, err, "start at 001")
	_, err = load(fstest.MapFS{"001_a.sql": file("SELECT 1"), "001_b.sql": file("SELECT 1")})
	require.ErrorContains(t, err, "appears twice")
	_, err = load(fstest.MapFS{"1_a.sql": file("SELECT 1")})
	require.ErrorContains(t, err, "NNN_name.sql")
	all, err := All()
	require.NoError(t, err)
	require.NotEmpty(t, all)
	for i, m := range all {
		require.Greater(t, m.Version, i, "in order, from 001")
	}
}
