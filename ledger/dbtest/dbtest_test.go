package dbtest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger/dbtest"
)

func TestSchemasAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := dbtest.New(t), dbtest.New(t)
	require.NotEqual(t, a.Schema, b.Schema)
	_, err := a.Pool.Exec(ctx, "CREATE TABLE only_in_a (n int)")
	require.NoError(t, err)
	var n int
	err = b.Pool.QueryRow(ctx, "SELECT count(*) FROM only_in_a").Scan(&n)
	require.Error(t, err, "a table made in one test's schema must not be visible in another's")
	require.NoError(t, a.Pool.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&n), "River's tables are migrated")
	require.NoError(t, a.Pool.QueryRow(ctx, "SELECT count(*) FROM triage_migration").Scan(&n))
	require.Positive(t, n)
}
