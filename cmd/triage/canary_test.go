package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/ledger/pgcluster"
	"github.com/triage-dev/triage/worker/workertest"
)

// canaryKey is the API key in the canary test. It is not key-shaped, so only
// the exact match of the redaction boundary can catch it.
const canaryKey = "CANARYq7Zp0x9mWv3LtKeY42"

// hostile answers like a provider (or a proxy in front of one) that echoes
// the caller's key into every field it controls: the error code, type and
// message, and its headers. Records not named here, and later calls of
// those named, get the fake provider's answer.
type hostile struct {
	next  http.Handler
	mu    sync.Mutex
	calls map[string]int
}

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	rec := r.Header.Get(fakeprovider.RecordHeader)
	h.mu.Lock()
	h.calls[rec]++
	n := h.calls[rec]
	h.mu.Unlock()
	echo := func(status int, typ string) {
		w.Header().Set("X-Echo", key)
		w.Header().Set("X-Request-Id", "req_"+key)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		body, _ := json.Marshal(map[string]any{"error": map[string]any{
			"message": "bad api_key=" + key + " \x1b[2J sent, see " + key,
			"type":    typ, "code": key + strings.Repeat("Z", 80), "param": key,
		}})
		_, _ = w.Write(body)
	}
	switch {
	case rec == "r001": // unknown 4xx: rejected, dead letter, unknown-error alert
		echo(418, key)
	case rec == "r002" && n == 1: // exhausted: breaker, key_exhausted alert
		echo(429, "insufficient_quota")
	case rec == "r003": // transient until retries run out
		echo(503, key)
	case rec == "r004": // rejected with a known status
		echo(400, key)
	default:
		h.next.ServeHTTP(w, r)
	}
}

func TestCanaryKeyAppearsNowhere(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	fake := fakeprovider.New(fakeprovider.Scenario{APIKey: canaryKey})
	t.Cleanup(func() { _ = fake.Close() })
	prov := httptest.NewServer(&hostile{next: fake, calls: map[string]int{}})
	t.Cleanup(prov.Close)
	var hook workertest.Webhook
	hookSrv := httptest.NewServer(&hook)
	t.Cleanup(hookSrv.Close)

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "triage.toml")
	toml := workertest.Config(workertest.ConfigOptions{BaseURL: prov.URL + "/v1", MaxAttempts: 2, WebhookURL: hookSrv.URL})
	require.NoError(t, os.WriteFile(cfgPath, []byte(toml), 0o600))
	envs := map[string]string{"DATABASE_URL": db.URL, workertest.APIKeyEnv: canaryKey}
	var all bytes.Buffer // every byte any command wrote
	run := func(ctx context.Context, args ...string) result {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return envs[k] }}
		code := run(ctx, append([]string{"--config", cfgPath}, args...), e)
		fmt.Fprintf(&all, "$ triage %s\n%s%s", strings.Join(args, " "), out.String(), errb.String())
		return result{code: code, stdout: out.String(), stderr: errb.String()}
	}
	in := filepath.Join(dir, "in.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(workertest.JSONL(6)), 0o600))

	r := run(context.Background(), "run", "--pipeline", "enrich", "--batch", "b1", "--max-wait", "60s", in)
	require.Equal(t, exitDeadLetters, r.code, r.stderr)
	require.Contains(t, r.stdout, "6 records, 3 completed, 3 dead-lettered")

	// A second batch through `work`, with its logs at INFO and its metrics.
	r = run(context.Background(), "enqueue", "--pipeline", "enrich", "--batch", "b2", in)
	require.Equal(t, exitOK, r.code, r.stderr)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() { done <- run(ctx, "work", "--metrics-addr", addr) }()
	require.Eventually(t, func() bool {
		var left int
		err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM triage_record rec
			WHERE rec.batch = 'b2' AND NOT EXISTS (SELECT 1 FROM triage_result res WHERE res.batch = rec.batch AND res.record_id = rec.record_id)
			AND NOT EXISTS (SELECT 1 FROM triage_dead_letter d WHERE d.batch = rec.batch AND d.record_id = rec.record_id)`).Scan(&left)
		return err == nil && left == 0
	}, 60*time.Second, 50*time.Millisecond)
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	metricsBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(metricsBody), "triage_")
	cancel()
	r = <-done
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "dead letter", "work logs its dead letters")

	for _, args := range [][]string{
		{"status"}, {"status", "--json"}, {"status", "b1"}, {"status", "b1", "--json"},
		{"dlq", "list"}, {"dlq", "list", "--json"}, {"dlq", "list", "--unknown"},
		{"keys"}, {"keys", "--json"}, {"ledger"}, {"ledger", "--json"}, {"ledger", "--batch", "b1"},
		{"export", "b1"},
	} {
		run(context.Background(), args...)
	}
	var ids []int64
	rows, err := db.Pool.Query(context.Background(), "SELECT id FROM triage_dead_letter")
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, ids, 6)
	for _, id := range ids {
		r = run(context.Background(), "dlq", "show", fmt.Sprint(id))
		require.Equal(t, exitOK, r.code, r.stderr)
		run(context.Background(), "dlq", "show", fmt.Sprint(id), "--json")
	}
	require.Contains(t, all.String(), "[REDACTED]", "the excerpts are there, redacted")
	require.NotContains(t, all.String(), "\x1b[2J", "control characters from the provider are escaped")
	require.Contains(t, all.String(), "api_key=[REDACTED]")
	require.NotContains(t, all.String(), "[REDACTED] api key]", "a key field is redacted once")
	require.Positive(t, hook.Count("unknown_error")+hook.Count("key_exhausted"), hook.All())

	dump := pgDump(t, db)
	require.Contains(t, dump, "triage_dead_letter", "the dump holds the tables")
	for what, text := range map[string]string{
		"command output and logs": all.String(), "webhook bodies": hook.All(),
		"/metrics": string(metricsBody), "pg_dump": dump,
	} {
		require.NotContains(t, text, canaryKey[:10], "the key leaked into the %s", what)
	}
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// pgDump dumps the test's schema with the pg_dump next to initdb.
func pgDump(t *testing.T, db *dbtest.DB) string {
	t.Helper()
	bin, err := pgcluster.FindBinaries()
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, "pg_dump"), "--no-owner", "-n", db.Schema, "-d", dbtest.ServerURL(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	return string(out)
}
