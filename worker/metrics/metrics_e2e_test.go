package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/metrics"
)

// TestWorkerEndToEnd runs a worker with a Metrics as its Observer against
// the fake provider and checks the scrape against the ledger: every call the
// ledger records was counted once, with the same spend.
func TestWorkerEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.Options{MaxConns: 20})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	step := func(n int) fakeprovider.Step { return fakeprovider.Step{Status: n} }
	fake := fakeprovider.New(fakeprovider.Scenario{
		APIKey: "sk-test-secret",
		RecordScripts: map[string][]fakeprovider.Step{
			"r002": {step(503), step(200)},
			"r004": {step(500), step(500), step(200)},
			"r005": {{Action: fakeprovider.ActionInvalidParam}},
		},
	})
	srv := httptest.NewServer(fake)
	t.Cleanup(func() { fake.Close(); srv.Close() })

	cfg, err := config.Parse([]byte(fmt.Sprintf(`
[[keys]]
name = "main"
vendor = "openai"
base_url = %q
api_key_env = "FAKE_API_KEY"
concurrency = 4
timeout = "5s"
probe_interval = "500ms"

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
output = "json"
max_attempts = 6
`, srv.URL+"/v1")), "test.toml")
	require.NoError(t, err)

	recs := make([]ledger.Record, 5)
	for i := range recs {
		id := fmt.Sprintf("r%03d", i+1)
		recs[i] = ledger.Record{ID: id, Line: i + 1, Data: json.RawMessage(fmt.Sprintf(`{"id":%q}`, id))}
	}
	require.NoError(t, worker.Enqueue(ctx, db.Pool, db.Schema, cfg, worker.EnqueueParams{Pipeline: "enrich", Batch: "b1", Records: recs}))

	// The worker runs on its own pool, as a separate process would.
	pool, err := pgxpool.New(ctx, db.URL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	m := metrics.New(pool, keys.NewStore(pool, keys.StoreConfig{RiverSchema: db.Schema}),
		metrics.Options{Keys: []string{"main"}, Logger: quiet})
	rt, err := worker.New(worker.Options{
		Config: cfg, Pool: pool, Schema: db.Schema, Logger: quiet, Observer: m,
		Getenv:      func(k string) string { return map[string]string{"FAKE_API_KEY": "sk-test-secret"}[k] },
		BackoffBase: 10 * time.Millisecond, BackoffCap: 100 * time.Millisecond, ThrottleWait: 50 * time.Millisecond,
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, SupervisorTick: 25 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, rt.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Stop(sctx)
	})

	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := ledger.BatchStatus(ctx, db.Pool, "b1")
		require.NoError(t, err)
		if st.Completed+st.DeadLettered == st.Total {
			require.Equal(t, 4, st.Completed)
			require.Equal(t, 1, st.DeadLettered)
			break
		}
		require.False(t, time.Now().After(deadline), "batch did not settle: %+v", st)
		<-tick.C
	}

	attempts, err := ledger.ListAttempts(ctx, db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, attempts, 8, "r001, r003: 1 call; r002: 2; r004: 3; r005: 1")
	var retries int
	var spend float64
	for _, a := range attempts {
		if a.IsRetry {
			retries++
		}
		spend += a.CostUSD
	}
	require.Positive(t, spend)

	ts := httptest.NewServer(m.Handler())
	t.Cleanup(ts.Close)
	fams := scrape(t, ts.URL)
	require.Equal(t, float64(len(attempts)), sum(fams, "triage_calls_total"), "one count per ledger attempt")
	require.Equal(t, 4.0, mustValue(t, fams, "triage_calls_total", L{"key": "main", "class": "ok", "status": "200"}))
	require.Equal(t, 1.0, mustValue(t, fams, "triage_calls_total", L{"key": "main", "class": "transient", "status": "503"}))
	require.Equal(t, 2.0, mustValue(t, fams, "triage_calls_total", L{"key": "main", "class": "transient", "status": "500"}))
	require.Equal(t, 1.0, mustValue(t, fams, "triage_calls_total", L{"key": "main", "class": "rejected", "status": "400"}))
	require.Equal(t, float64(retries), sum(fams, "triage_retries_total"))
	require.Equal(t, 3.0, sum(fams, "triage_retries_total"))
	require.Equal(t, 0.0, mustValue(t, fams, "triage_unknown_errors_total", L{"key": "main"}))
	require.InDelta(t, spend, mustValue(t, fams, "triage_spend_usd_total", L{"key": "main"}), 1e-9)
	require.InDelta(t, spend, mustValue(t, fams, "triage_key_spend_usd", L{"key": "main"}), 1e-9, "the ledger's fleet-wide spend")
	require.Equal(t, 0.0, mustValue(t, fams, "triage_breaker_state", L{"key": "main"}))
	require.Equal(t, 0.0, mustValue(t, fams, "triage_key_paused", L{"key": "main"}))

	var count uint64
	for _, s := range fams["triage_call_duration_seconds"].GetMetric() {
		count += s.GetHistogram().GetSampleCount()
	}
	require.Equal(t, uint64(len(attempts)), count)
}
