package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/workertest"
)

// hostileBatch is an OpenAI Batch API (the fake provider behind it) that
// echoes the caller's key, control characters and an over-long code into
// what a batch sends back: every poll fails with such an error until
// healed, and one line's answer is such an error: the first line of the
// first output file, and that record's line wherever it is read again. Not
// the first line of every file: at load the four lines may form two
// provider batches (gathered 200 ms), which made two dead letters of one.
type hostileBatch struct {
	next   http.Handler
	healed atomic.Bool

	mu       sync.Mutex
	poisoned string // the custom_id whose answer is the error
}

// poison reports whether the line with custom_id id is the hostile one,
// choosing it when first is the first line of a file and none is chosen.
func (h *hostileBatch) poison(id string, first bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.poisoned == "" && first {
		h.poisoned = id
	}
	return id == h.poisoned
}

func hostileError(key string) map[string]any {
	return map[string]any{"error": map[string]any{
		"message": "bad api_key=" + key + " \x1b[2J sent, see " + key,
		"type":    key, "code": key + strings.Repeat("Z", 80), "param": key,
	}}
}

func (h *hostileBatch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/batches/") && !h.healed.Load():
		w.Header().Set("X-Echo", key)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(hostileError(key))
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/content"):
		rec := httptest.NewRecorder()
		h.next.ServeHTTP(rec, r)
		var out bytes.Buffer
		sc := bufio.NewScanner(rec.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for first := true; sc.Scan(); first = false {
			line := sc.Bytes()
			var m map[string]any
			if json.Unmarshal(line, &m) == nil {
				if id, _ := m["custom_id"].(string); id != "" && h.poison(id, first) {
					m["response"] = map[string]any{"status_code": 400, "request_id": "req_" + key, "body": hostileError(key)}
					line, _ = json.Marshal(m)
				}
			}
			out.Write(line)
			out.WriteByte('\n')
		}
		for k, v := range rec.Header() {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(out.Bytes())
	default:
		h.next.ServeHTTP(w, r)
	}
}

// Batch mode: what a provider batch sends back (its lines' answers, its
// errors) passes the same redaction boundary as a synchronous answer
// before it reaches a row, a log, status or the dead letters.
func TestCanaryKeyAppearsNowhereInBatchMode(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	fake := fakeprovider.New(fakeprovider.Scenario{APIKey: canaryKey, NoReplay: true})
	t.Cleanup(func() { _ = fake.Close() })
	h := &hostileBatch{next: fake}
	prov := httptest.NewServer(h)
	t.Cleanup(prov.Close)
	var hook workertest.Webhook
	hookSrv := httptest.NewServer(&hook)
	t.Cleanup(hookSrv.Close)

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "triage.toml")
	toml := workertest.Config(workertest.ConfigOptions{BaseURL: prov.URL + "/v1", MaxAttempts: 2, WebhookURL: hookSrv.URL,
		ExtraPipeline: "mode = \"batch\"\n"})
	toml = strings.Replace(toml, "\napi_key_env = ",
		"\nbatch_gather = \"200ms\"\nbatch_poll_min = \"100ms\"\nbatch_poll_max = \"200ms\"\napi_key_env = ", 1)
	require.NoError(t, os.WriteFile(cfgPath, []byte(toml), 0o600))
	envs := map[string]string{"DATABASE_URL": db.URL, workertest.APIKeyEnv: canaryKey}
	var all safeBuffer // every byte any command wrote
	triage := func(ctx context.Context, args ...string) result {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return envs[k] }}
		code := run(ctx, append([]string{"--config", cfgPath}, args...), e)
		fmt.Fprintf(&all, "$ triage %s\n%s%s", strings.Join(args, " "), out.String(), errb.String())
		return result{code: code, stdout: out.String(), stderr: errb.String()}
	}
	in := filepath.Join(dir, "in.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(workertest.JSONL(4)), 0o600))

	// The run, with its web page; its output is read while it runs.
	var runErr workertest.Buffer
	done := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &runErr, getenv: func(k string) string { return envs[k] }}
		code := run(context.Background(), []string{"--config", cfgPath, "run", "--pipeline", "enrich", "--batch", "b1",
			"--max-wait", "60s", "--ui-addr", "127.0.0.1:0", in}, e)
		done <- result{code: code, stdout: out.String(), stderr: runErr.String()}
	}()
	// While the polls fail, the provider batch says why, and status and the
	// page show it.
	var lastErr string
	require.Eventually(t, func() bool {
		err := db.Pool.QueryRow(context.Background(),
			`SELECT coalesce(max(last_error), '') FROM triage_provider_batch`).Scan(&lastErr)
		return err == nil && lastErr != ""
	}, 30*time.Second, 20*time.Millisecond)
	for _, args := range [][]string{{"status", "b1", "--json"}, {"status", "b1"}, {"status", "--json"}} {
		triage(context.Background(), args...)
	}
	m := regexp.MustCompile(`web window: (http://127\.0\.0\.1:\d+/batches/b1)`).FindStringSubmatch(runErr.String())
	require.NotNil(t, m, runErr.String())
	var page bytes.Buffer
	for _, u := range []string{m[1], m[1] + "?format=json"} {
		resp, err := http.Get(u)
		require.NoError(t, err)
		_, _ = page.ReadFrom(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	require.Contains(t, page.String(), "batchapi: get: status 400", "the page shows the failing polls")
	snapshot := pgDump(t, db)
	h.healed.Store(true)
	r := <-done
	fmt.Fprintf(&all, "$ triage run\n%s%s", r.stdout, r.stderr)
	require.Equal(t, exitDeadLetters, r.code, r.stderr)
	require.Contains(t, r.stdout, "4 records, 3 completed, 1 dead-lettered")

	for _, args := range [][]string{
		{"status"}, {"status", "--json"}, {"status", "b1"}, {"status", "b1", "--json"},
		{"dlq", "list"}, {"dlq", "list", "--json"}, {"dlq", "show", "1"}, {"dlq", "show", "1", "--json"},
		{"keys"}, {"keys", "--json"}, {"ledger"}, {"ledger", "--json"}, {"export", "b1"},
	} {
		triage(context.Background(), args...)
	}
	out := all.String()
	require.NotContains(t, out+page.String(), "\x1b[2J", "control characters from the provider are escaped")
	require.NotContains(t, lastErr, "ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ")
	dump := pgDump(t, db)
	require.Contains(t, dump, "triage_provider_batch_line", "the dump holds the batch tables")
	for what, text := range map[string]string{
		"command output and logs": out, "webhook bodies": hook.All(), "last_error": lastErr, "web page": page.String(),
		"pg_dump while the polls failed": snapshot, "pg_dump": dump,
	} {
		require.NotContains(t, text, canaryKey[:10], "the key leaked into the %s", what)
	}
}

// safeBuffer is a bytes.Buffer for commands that write from two goroutines.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
