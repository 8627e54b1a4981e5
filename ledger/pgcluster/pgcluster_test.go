package pgcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger/pgcluster"
)

// TestStartReuseStop exercises the real lifecycle: initdb, start, connect,
// start again (reuse, no second initdb), stop, start after stop, remove. The
// temporary directory is 0700, so as root this also covers the shadow
// directory used when the server's user cannot enter the requested path.
func TestStartReuseStop(t *testing.T) {
	t.Parallel()
	if _, err := pgcluster.FindBinaries(); err != nil {
		t.Fatalf("the test suite needs the PostgreSQL server binaries: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	parent := t.TempDir()
	require.NoError(t, os.Chmod(parent, 0o700))
	dir := filepath.Join(parent, "pg")

	c, err := pgcluster.Start(ctx, dir, pgcluster.Options{Fast: true, Database: "app"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Remove(context.Background()) })
	if os.Geteuid() == 0 {
		require.NotContains(t, c.DataDir, parent, "as root the server's user cannot enter a 0700 directory: the cluster must live in a shadow directory")
		require.FileExists(t, filepath.Join(dir, "WHERE.txt"))
		require.True(t, strings.HasPrefix(c.DataDir, pgcluster.ShadowBase+"/"), "the shadow survives tmp cleaners: %s", c.DataDir)
		require.True(t, c.Shadow())
	}
	require.True(t, pgcluster.Exists(dir))
	require.False(t, pgcluster.Exists(filepath.Join(parent, "nothing")))
	_, err = os.Stat(filepath.Join(parent, "nothing"))
	require.ErrorIs(t, err, os.ErrNotExist, "Exists creates nothing")

	query := func(c *pgcluster.Cluster) string {
		conn, err := pgx.Connect(ctx, c.URL())
		require.NoError(t, err)
		defer conn.Close(ctx)
		var db string
		require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&db))
		_, err = conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS kept (n int)")
		require.NoError(t, err)
		return db
	}
	require.Equal(t, "app", query(c))

	again, err := pgcluster.Start(ctx, dir, pgcluster.Options{Fast: true, Database: "app"})
	require.NoError(t, err)
	require.Equal(t, c.DataDir, again.DataDir)
	require.True(t, again.Running(ctx))

	require.NoError(t, c.Stop(ctx))
	require.False(t, c.Running(ctx))
	require.NoError(t, c.Stop(ctx), "stopping a stopped cluster is not an error")

	restarted, err := pgcluster.Start(ctx, dir, pgcluster.Options{Fast: true, Database: "app"})
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, restarted.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n), "data survives a restart")

	require.NoError(t, restarted.Remove(ctx))
	require.False(t, pgcluster.Exists(dir))
	_, err = os.Stat(filepath.Dir(restarted.DataDir))
	require.ErrorIs(t, err, os.ErrNotExist, "Remove deletes the shadow directory too")
}
