package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/workertest"
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
	// The top-up waits for the breaker to reopen: usually a failed probe,
	// but a probe that resends an unanswered call can be answered by the
	// fake's Idempotency-Key replay and close the breaker once before the
	// next call finds the key empty again.
	require.Regexp(t, `the probe failed|(?s)key main exhausted.*key main exhausted`, r.stderr)
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

// The demo as a new user meets it: it ends by naming its batch's dead-letter
// page and keeps serving it; a poisoned record requeued through the page
// completes; Ctrl-C ends it with the batch's exit code.
func TestDemoServesItsDeadLettersUntilInterrupted(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.Options{MaxConns: 30})
	envs := map[string]string{"DATABASE_URL": db.URL}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr workertest.Buffer
	done := make(chan int, 1)
	go func() {
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return envs[k] }}
		done <- run(ctx, []string{"demo", "--ui-addr", "127.0.0.1:0", "--progress-interval", "5s"}, e)
	}()
	pageRe := regexp.MustCompile(`dead letters of this batch: (http://127\.0\.0\.1:\d+)/dead-letters\?batch=(\S+)`)
	var base, batch string
	workertest.Eventually(t, 4*time.Minute, "the demo names its dead-letter page", func() bool {
		m := pageRe.FindStringSubmatch(stdout.String())
		if m != nil {
			base, batch = m[1], m[2]
		}
		return m != nil
	})
	getJSON := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	}
	var dls []ledger.DeadLetterListItem
	getJSON("/dead-letters?format=json&batch="+batch, &dls)
	var poisoned int64
	for _, dl := range dls {
		if dl.Code != nil && *dl.Code == "integer_below_min_value" { // a POISON_INVALID record
			poisoned = dl.ID
		}
	}
	require.NotZero(t, poisoned, "a poisoned record among %d dead letters", len(dls))
	var before ledger.Status
	getJSON("/batches/"+batch+"?format=json", &before)

	resp, err := http.PostForm(base+"/dead-letters/requeue", url.Values{"id": {strconv.FormatInt(poisoned, 10)}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "redirected to the dead-letter page")
	workertest.Eventually(t, time.Minute, "the requeued record completes", func() bool {
		var st ledger.Status
		getJSON("/batches/"+batch+"?format=json", &st)
		return st.Completed == before.Completed+1 && st.DeadLettered == before.DeadLettered-1
	})
	require.Contains(t, stderr.String(), "alert_kind=dead_letters_requeued")

	cancel()
	select {
	case code := <-done:
		require.Equal(t, exitOK, code, stderr.String())
	case <-time.After(time.Minute):
		t.Fatal("the demo did not stop on interrupt")
	}
}

// `make demo` runs the built binary, not `go run`: on Ctrl-C the terminal
// interrupts every process of the group, and `go run` exits 1 when it is
// interrupted even though the demo exits 0, so make ended with
// "make: *** [Makefile:58: demo] Error 1" (issue 24).
func TestMakeDemoDoesNotGoRun(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	_, recipe, ok := strings.Cut(string(b), "\ndemo:")
	require.True(t, ok, "the Makefile has a demo target")
	recipe, _, _ = strings.Cut(recipe, "\n\n")
	require.NotContains(t, recipe, "go run")
	require.NotContains(t, recipe, "$(GO) run")
	require.Contains(t, recipe, "bin/triage demo")
}

// Run from the repository's bin/ (as `make demo` does), the commands to
// look next name bin/triage.
func TestSelfCommandInBin(t *testing.T) {
	t.Parallel()
	e := &env{executable: func() (string, error) { return "/src/triage/bin/triage", nil },
		getwd: func() (string, error) { return "/src/triage", nil }}
	require.Equal(t, "bin/triage", selfCommand(e))
	e.getwd = func() (string, error) { return "/elsewhere", nil }
	require.Equal(t, "triage", selfCommand(e))
}
