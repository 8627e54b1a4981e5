package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger/pgcluster"
	"github.com/triage-dev/triage/worker/workertest"
)

// Commands that only look never create a database: with nothing
// configured and no .triage/pg here they say where they looked and how to
// point them at one, exit 2, and leave the directory as it was. (Not
// parallel: it changes the working directory.)
func TestLookingCommandsCreateNoCluster(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{
		{"status"}, {"status", "b1", "--json"}, {"export", "b1"}, {"dlq", "list"}, {"dlq", "show", "1"},
		{"keys"}, {"keys", "resume", "main"}, {"ledger"}, {"batch", "budget", "b1", "5"}, {"batch", "cancel", "b1"}, {"migrate"},
	} {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		code := run(context.Background(), args, e)
		require.Equal(t, exitUsage, code, "%v: %s", args, errb.String())
		require.Contains(t, errb.String(), "no database", "%v", args)
		require.Contains(t, errb.String(), "DATABASE_URL", "%v says how to point it at one", args)
		require.Contains(t, errb.String(), dir, "%v says where it looked", args)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, entries, "%v created nothing", args)
	}
}

// As root, with a project directory the server's OS user cannot enter, the
// embedded cluster lives in a shadow directory: db url, status and run's
// first line say where, and db stop --remove removes it. (Not parallel: it
// changes the working directory.)
func TestShadowClusterIsNamedAndRemoved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the shadow directory is only used as root")
	}
	dir := t.TempDir() // 0700: the server's user cannot enter it
	t.Chdir(dir)
	_, baseURL := workertest.Provider(t, fakeprovider.Scenario{APIKey: cliAPIKey})
	require.NoError(t, os.WriteFile("triage.toml", []byte(workertest.Config(workertest.ConfigOptions{BaseURL: baseURL})), 0o600))
	require.NoError(t, os.WriteFile("in.jsonl", []byte(jsonl(2)), 0o600))
	envs := map[string]string{workertest.APIKeyEnv: cliAPIKey}
	cmd := func(args ...string) result {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return envs[k] }}
		return result{code: run(context.Background(), args, e), stdout: out.String(), stderr: errb.String()}
	}
	t.Cleanup(func() { cmd("db", "stop", "--remove") })

	r := cmd("run", "--pipeline", "enrich", "--batch", "b1", "in.jsonl")
	require.Equal(t, exitOK, r.code, r.stderr)
	first, _, _ := strings.Cut(r.stderr, "\n")
	require.Contains(t, first, "database: the private cluster in .triage/pg (files in "+pgcluster.ShadowBase+"/")
	shadow := strings.TrimSuffix(strings.SplitN(first, "files in ", 2)[1], ")")
	require.DirExists(t, shadow)

	r = cmd("status")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, shadow)
	r = cmd("db", "url")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, shadow)

	r = cmd("db", "stop", "--remove")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "stopped the cluster and removed its files (the whole database): ")
	require.Contains(t, r.stderr, filepath.Dir(shadow), "it says what it removed")
	require.NoDirExists(t, shadow)
	require.NoDirExists(t, ".triage/pg")
}

// A looking command does not start a private cluster someone stopped: it
// says the cluster is stopped and how to start it, exits 2, and the
// cluster stays stopped (issue 24: `triage status` quietly restarted it).
// (Not parallel: it changes the working directory.)
func TestLookingCommandsDoNotStartAStoppedCluster(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	require.NoError(t, os.WriteFile("in.jsonl", []byte(jsonl(2)), 0o600))
	_, baseURL := workertest.Provider(t, fakeprovider.Scenario{APIKey: cliAPIKey})
	require.NoError(t, os.WriteFile("triage.toml", []byte(workertest.Config(workertest.ConfigOptions{BaseURL: baseURL})), 0o600))
	envs := map[string]string{workertest.APIKeyEnv: cliAPIKey}
	cmd := func(args ...string) result {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return envs[k] }}
		return result{code: run(context.Background(), args, e), stdout: out.String(), stderr: errb.String()}
	}
	t.Cleanup(func() { cmd("db", "stop", "--remove") })
	r := cmd("enqueue", "--pipeline", "enrich", "--batch", "b1", "in.jsonl")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = cmd("db", "stop")
	require.Equal(t, exitOK, r.code, r.stderr)

	for _, args := range [][]string{{"status"}, {"status", "b1", "--json"}, {"dlq", "list"}, {"ledger"}, {"keys"}} {
		r = cmd(args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "the private cluster in .triage/pg is stopped", "%v", args)
		require.Contains(t, r.stderr, "`triage db start`", "%v says how to start it", args)
	}
	c, err := pgcluster.Open(".triage/pg")
	require.NoError(t, err)
	require.False(t, c.Running(context.Background()), "still stopped")

	// Commands that work start it, as before.
	r = cmd("enqueue", "--pipeline", "enrich", "--batch", "b2", "in.jsonl")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = cmd("status")
	require.Equal(t, exitOK, r.code, r.stderr)
}
