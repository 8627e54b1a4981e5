package migrations_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/migrations"
)

// Migrate twice: the second run applies nothing. Two processes at once:
// each file is applied exactly once and both succeed.
func TestMigrateIsIdempotentAndSafeConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.Options{NoMigrate: true})
	all, err := migrations.All()
	require.NoError(t, err)

	var wg sync.WaitGroup
	results := make([]*migrations.Result, 2)
	errs := make([]error, 2)
	for i := range 2 {
		pool, err := pgxpool.New(ctx, db.URL) // a second "process"
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = migrations.Migrate(ctx, pool, db.Schema)
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, len(all), len(results[0].Triage)+len(results[1].Triage), "each triage migration applied exactly once")
	require.NotEmpty(t, append(results[0].River, results[1].River...))

	again, err := migrations.Migrate(ctx, db.Pool, db.Schema)
	require.NoError(t, err)
	require.Empty(t, again.Triage)
	require.Empty(t, again.River)
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM triage_migration").Scan(&n))
	require.Equal(t, len(all), n)
}

// A schema with no migrations is not up to date; once migrated it is.
func TestUpToDate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.Options{NoMigrate: true})
	ok, err := migrations.UpToDate(ctx, db.Pool)
	require.NoError(t, err)
	require.False(t, ok, "no triage_migration table")
	_, err = migrations.Migrate(ctx, db.Pool, db.Schema)
	require.NoError(t, err)
	ok, err = migrations.UpToDate(ctx, db.Pool)
	require.NoError(t, err)
	require.True(t, ok)
}

// migratedBefore is a schema of its own migrated up to, not including, the
// migration named name: a backfill's test writes the rows it must find.
func migratedBefore(t *testing.T, name string) *dbtest.DB {
	t.Helper()
	db := dbtest.New(t, dbtest.Options{NoMigrate: true})
	all, err := migrations.All()
	require.NoError(t, err)
	at := slices.IndexFunc(all, func(m migrations.Migration) bool { return m.Name == name })
	require.Positive(t, at, "migration %s", name)
	_, err = migrations.MigrateThese(context.Background(), db.Pool, db.Schema, all[:at])
	require.NoError(t, err)
	return db
}

// backfilled runs a backfill on rows of the test's own: a schema migrated
// up to, not including, the migration named name, seeded by the statements
// seed, then migrated to the end; it returns what query reads after, a row
// (key, value) an entry.
func backfilled[K comparable, V any](t *testing.T, name, seed, query string) map[K]V {
	t.Helper()
	ctx := context.Background()
	db := migratedBefore(t, name)
	_, err := db.Pool.Exec(ctx, seed)
	require.NoError(t, err)
	_, err = migrations.Migrate(ctx, db.Pool, db.Schema)
	require.NoError(t, err)
	rows, err := db.Pool.Query(ctx, query)
	require.NoError(t, err)
	got := map[K]V{}
	var k K
	var v V
	_, err = pgx.ForEachRow(rows, []any{&k, &v}, func() error { got[k] = v; return nil })
	require.NoError(t, err)
	return got
}
