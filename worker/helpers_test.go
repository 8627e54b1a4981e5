package worker_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/workertest"
)

// testBundle is one end-to-end world: a private schema, the fake provider,
// a webhook receiver and a configuration pointing at them.
type testBundle struct {
	db       *dbtest.DB
	fake     *fakeprovider.Server
	hooks    hooks
	cfg      *config.Config
	tomlText string
	opts     worker.Options
}

// tweaks are the configuration knobs the tests turn; zero values keep the
// defaults of setup (workertest.ConfigOptions's, with output json and
// max_attempts 6 written out).
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
	b := &testBundle{db: dbtest.New(t, dbtest.Options{MaxConns: 60}), hooks: hooks{&workertest.Webhook{}}}
	sc.APIKey = workertest.APIKey
	fake, baseURL := workertest.Provider(t, sc)
	b.fake = fake
	hookSrv := httptest.NewServer(b.hooks.Webhook)
	t.Cleanup(hookSrv.Close)

	if tw.maxAttempts == 0 {
		tw.maxAttempts = 6
	}
	if tw.output == "" {
		tw.output = "json"
	}
	toml := workertest.Config(workertest.ConfigOptions{
		BaseURL: baseURL, WebhookURL: hookSrv.URL,
		Vendor: tw.vendor, Concurrency: tw.concurrency, Timeout: tw.timeout, ProbeInterval: tw.probeInterval,
		MaxAttempts: tw.maxAttempts, Output: tw.output,
		ExtraAlerts: tw.extraAlerts, ExtraKey: tw.extraKey, ExtraPipeline: tw.extraPipeline,
	})
	cfg, err := config.Parse([]byte(toml), "test.toml")
	require.NoError(t, err)
	b.cfg, b.tomlText = cfg, toml
	b.opts = workertest.WorkerOptions(cfg, b.db.Schema)
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

func (b *testBundle) enqueue(t testing.TB, batch string, recs []ledger.Record) {
	t.Helper()
	require.NoError(t, enqueue.Batch(context.Background(), b.db.Pool, b.db.Schema, b.cfg,
		enqueue.Params{Pipeline: workertest.Pipeline, Batch: batch, Records: recs}))
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
	return workertest.WaitSettled(t, b.db.Pool, batch, timeout)
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
	return b.countBy(t, "SELECT state::text, count(*) FROM river_job GROUP BY 1")
}

// countBy runs a "SELECT label, count(*) … GROUP BY 1" query and returns
// the counts by label.
func (b *testBundle) countBy(t testing.TB, query string) map[string]int {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), query)
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

// The names below keep the package's tests reading as they did before the
// world moved to workertest.

// records is workertest.Records.
func records(n int, extra func(i int) string) []ledger.Record { return workertest.Records(n, extra) }

// eventually is workertest.Eventually.
func eventually(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	workertest.Eventually(t, timeout, msg, cond)
}

// hooks is the bundle's workertest.Webhook.
type hooks struct{ *workertest.Webhook }

func (h hooks) count(kind string) int { return h.Count(kind) }
func (h hooks) all() string           { return h.All() }
