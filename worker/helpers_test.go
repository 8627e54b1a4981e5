package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
)

// testBundle is one end-to-end world: a private schema, the fake provider,
// a webhook receiver and a configuration pointing at them.
type testBundle struct {
	db       *dbtest.DB
	fake     *fakeprovider.Server
	srv      *httptest.Server
	hooks    *webhook
	cfg      *config.Config
	tomlText string
	opts     worker.Options
	running  []*worker.Runtime
}

type tweaks struct {
	vendor        string
	concurrency   int
	timeout       string
	probeInterval string
	maxAttempts   int
	output        string
	extraPipeline string
	extraKey      string
	extraAlerts   string
}

func setup(t testing.TB, sc fakeprovider.Scenario, tw tweaks) *testBundle {
	t.Helper()
	b := &testBundle{db: dbtest.New(t, dbtest.Options{MaxConns: 60}), hooks: &webhook{}}
	sc.APIKey = "sk-test-secret"
	b.fake = fakeprovider.New(sc)
	b.srv = httptest.NewServer(b.fake)
	t.Cleanup(func() { b.fake.Close(); b.srv.Close() })
	hookSrv := httptest.NewServer(b.hooks)
	t.Cleanup(hookSrv.Close)

	if tw.vendor == "" {
		tw.vendor = "openai"
	}
	if tw.concurrency == 0 {
		tw.concurrency = 4
	}
	if tw.timeout == "" {
		tw.timeout = "5s"
	}
	if tw.probeInterval == "" {
		tw.probeInterval = "500ms"
	}
	if tw.maxAttempts == 0 {
		tw.maxAttempts = 6
	}
	if tw.output == "" {
		tw.output = "json"
	}
	toml := fmt.Sprintf(`
[alerts]
webhook_url = %q
%s

[[keys]]
name = "main"
vendor = %q
base_url = %q
api_key_env = "FAKE_API_KEY"
concurrency = %d
timeout = %q
probe_interval = %q
%s

[[models]]
name = "fake-model"
key = "main"
input_usd_per_mtok = 0.15
output_usd_per_mtok = 0.60

[[pipelines]]
name = "enrich"
model = "fake-model"
system = "You add fields to records. Answer with one JSON object."
prompt = "Record: {{json .}}"
output = %q
max_attempts = %d
%s`, hookSrv.URL, tw.extraAlerts, tw.vendor, b.srv.URL+"/v1", tw.concurrency, tw.timeout, tw.probeInterval, tw.extraKey, tw.output, tw.maxAttempts, tw.extraPipeline)
	cfg, err := config.Parse([]byte(toml), "test.toml")
	require.NoError(t, err)
	b.cfg, b.tomlText = cfg, toml
	b.opts = worker.Options{
		Config: cfg, Schema: b.db.Schema,
		Getenv:            func(k string) string { return map[string]string{"FAKE_API_KEY": "sk-test-secret"}[k] },
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		BackoffBase:       10 * time.Millisecond,
		BackoffCap:        100 * time.Millisecond,
		ThrottleWait:      50 * time.Millisecond,
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		SupervisorTick:    25 * time.Millisecond,
	}
	return b
}

// start runs a worker process on its own pool (a separate process as far as
// the database can tell).
func (b *testBundle) start(t testing.TB) *worker.Runtime {
	t.Helper()
	rt := b.newRuntime(t)
	b.run(t, rt)
	return rt
}

// newRuntime builds a worker process on its own pool without starting it.
func (b *testBundle) newRuntime(t testing.TB) *worker.Runtime {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), b.db.URL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	opts := b.opts
	opts.Pool = pool
	rt, err := worker.New(opts)
	require.NoError(t, err)
	return rt
}

// run starts rt and stops it when the test ends.
func (b *testBundle) run(t testing.TB, rt *worker.Runtime) {
	t.Helper()
	require.NoError(t, rt.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Stop(ctx)
	})
}

func records(n int, extra func(i int) string) []ledger.Record {
	out := make([]ledger.Record, n)
	for i := range out {
		id := fmt.Sprintf("r%03d", i+1)
		data := fmt.Sprintf(`{"id":%q,"name":"name %d"%s}`, id, i+1, func() string {
			if extra == nil {
				return ""
			}
			return extra(i)
		}())
		out[i] = ledger.Record{ID: id, Line: i + 1, Data: json.RawMessage(data)}
	}
	return out
}

func (b *testBundle) enqueue(t testing.TB, batch string, recs []ledger.Record) {
	t.Helper()
	require.NoError(t, worker.Enqueue(context.Background(), b.db.Pool, b.db.Schema, b.cfg,
		worker.EnqueueParams{Pipeline: "enrich", Batch: batch, Records: recs}))
}

func (b *testBundle) status(t testing.TB, batch string) ledger.Status {
	t.Helper()
	st, err := ledger.BatchStatus(context.Background(), b.db.Pool, batch)
	require.NoError(t, err)
	return st
}

// waitSettled polls until every record is completed or dead-lettered.
func (b *testBundle) waitSettled(t testing.TB, batch string, timeout time.Duration) ledger.Status {
	t.Helper()
	var st ledger.Status
	eventually(t, timeout, "batch "+batch+" settles", func() bool {
		st = b.status(t, batch)
		return st.Completed+st.DeadLettered == st.Total
	})
	return st
}

func (b *testBundle) deadLetters(t testing.TB, batch string) []ledger.DeadLetter {
	t.Helper()
	dls, err := ledger.ListDeadLetters(context.Background(), b.db.Pool, ledger.DeadLetterFilter{Batch: batch})
	require.NoError(t, err)
	return dls
}

// jobStates counts the batch's River jobs by state.
func (b *testBundle) jobStates(t testing.TB) map[string]int {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), "SELECT state::text, count(*) FROM river_job GROUP BY 1")
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", timeout, msg)
		}
		<-tick.C
	}
}

// webhook is an alert receiver that counts alerts by kind.
type webhook struct {
	mu     sync.Mutex
	kinds  map[string]int
	bodies []string
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(body, &m)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.kinds == nil {
		w.kinds = map[string]int{}
	}
	w.kinds[m.Kind]++
	w.bodies = append(w.bodies, string(body))
	rw.WriteHeader(http.StatusNoContent)
}

func (w *webhook) count(kind string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kinds[kind]
}

func (w *webhook) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.bodies, "\n")
}
