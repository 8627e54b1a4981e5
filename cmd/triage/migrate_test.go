package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger/dbtest"
)

func TestMigrateWithoutConfigFile(t *testing.T) {
	t.Parallel()
	fresh := dbtest.New(t, dbtest.Options{NoMigrate: true})
	envs := map[string]string{"DATABASE_URL": fresh.URL}

	// A command that needs the schema says what to do.
	r := runBare(t, envs, "status")
	require.Equal(t, exitRuntime, r.code)
	require.Contains(t, r.stderr, "run `triage migrate`")

	r = runBare(t, envs, "migrate")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "river:  applied 1,")
	require.Contains(t, r.stdout, "triage: applied 001_ledger, 002_keys")

	r = runBare(t, envs, "migrate")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "is up to date")

	r = runBare(t, envs, "status", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "[]\n", r.stdout)
}

func TestMigrateBadUsage(t *testing.T) {
	t.Parallel()
	r := runBare(t, nil, "migrate", "extra")
	require.Equal(t, exitUsage, r.code)
	r = runBare(t, nil, "migrate", "--force")
	require.Equal(t, exitUsage, r.code)
	r = runBare(t, map[string]string{"DATABASE_URL": "postgres://%zz"}, "migrate")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "not valid")
}
