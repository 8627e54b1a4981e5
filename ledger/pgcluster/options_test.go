package pgcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger/pgcluster"
)

// A negative option is refused with its name before anything is written;
// a zero takes the default.
func TestStartRefusesBadOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts pgcluster.Options
		want string
	}{
		{"negative max connections", pgcluster.Options{MaxConnections: -1}, "Options.MaxConnections must not be negative"},
		{"negative start timeout", pgcluster.Options{StartTimeout: -time.Second}, "Options.StartTimeout must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "pg")
			c, err := pgcluster.Start(context.Background(), dir, tc.opts)
			require.ErrorContains(t, err, tc.want)
			require.Nil(t, c)
			_, statErr := os.Stat(dir)
			require.ErrorIs(t, statErr, os.ErrNotExist, "nothing written")
		})
	}
}

func TestOptionsWithDefaults(t *testing.T) {
	t.Parallel()
	o := pgcluster.Options{}.WithDefaults()
	require.Equal(t, 200, o.MaxConnections)
	require.Equal(t, "triage", o.Database)
	require.Equal(t, 60*time.Second, o.StartTimeout)
	require.Equal(t, -1, pgcluster.Options{MaxConnections: -1}.WithDefaults().MaxConnections)
}
