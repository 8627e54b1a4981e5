package main

import (
	"context"
	"errors"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
)

func TestDemoEndToEnd(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.Options{MaxConns: 30})
	envs := map[string]string{"DATABASE_URL": db.URL}

	r := runBare(t, envs, "demo", "--no-ui", "--progress-interval", "2s")
	require.Equal(t, exitOK, r.code, "stderr:\n%s\nstdout:\n%s", r.stderr, r.stdout)
	for _, class := range []string{"ok", "transient", "throttled", "exhausted", "rejected", "ambiguous"} {
		require.Regexp(t, `(?m)^\s+`+class+`\s+\d+\s+\d+\s`, r.stdout, "the summary has a row for %s", class)
	}
	require.Contains(t, r.stdout, "records billed twice: 0")
	require.Contains(t, r.stderr, "key main exhausted")
	require.Contains(t, r.stderr, "the probe failed")
	require.Contains(t, r.stderr, "demo: topped the account up")
	require.Contains(t, r.stderr, "key main resumed")

	id := regexp.MustCompile(`triage status (demo-\d{8}T\d{6}Z\S*)`).FindStringSubmatch(r.stdout)
	require.NotNil(t, id, r.stdout)
	st, err := ledger.BatchStatus(context.Background(), db.Pool, id[1])
	require.NoError(t, err)
	require.Equal(t, ledger.BatchSettled, st.State)
	require.Equal(t, 300, st.Total)
	require.Positive(t, st.DeadLettered, "the poisoned records")
	require.Contains(t, r.stdout, "triage dlq list --batch "+id[1])

	// The next commands work without a triage.toml.
	r = runBare(t, envs, "status", id[1], "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"state":"settled"`)
	r = runBare(t, envs, "dlq", "list", "--batch", id[1])
	require.Equal(t, exitOK, r.code, r.stderr)
}

func TestSelfCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		exe  string
		err  error
		want string
	}{
		{"/tmp/go-build4271845194/b001/exe/triage", nil, "go run ./cmd/triage"},
		{"/var/tmp/gotmp/go-build123/b001/exe/triage", nil, "go run ./cmd/triage"},
		{"/usr/local/bin/triage", nil, "triage"},
		{"/home/me/go/bin/triage", nil, "triage"},
		{"/home/me/exe/triage", nil, "triage"},
		{"/tmp/go-build1/b001/triage.test", nil, "triage"},
		{"", errors.New("no executable"), "triage"},
	} {
		e := &env{executable: func() (string, error) { return tc.exe, tc.err }}
		require.Equal(t, tc.want, selfCommand(e), tc.exe)
	}
	require.Equal(t, "triage", selfCommand(&env{}), "unknown executable")
}
