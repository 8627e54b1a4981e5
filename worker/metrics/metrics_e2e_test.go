package metrics_test

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
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/metrics"
	"github.com/triage-dev/triage/worker/workertest"
)

// TestWorkerEndToEnd runs a worker with a Metrics as its Observer against
// the fake provider and checks the scrape against the ledger: every call the
// ledger records was counted once, with the same spend.
func TestWorkerEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.Options{MaxConns: 20})

	step := func(n int) fakeprovider.Step { return fakeprovider.Step{Status: n} }
	_, baseURL := workertest.Provider(t, fakeprovider.Scenario{
		APIKey: workertest.APIKey,
		RecordScripts: map[string][]fakeprovider.Step{
			"r002": {step(503), step(200)},
			"r004": {step(500), step(500), step(200)},
			"r005": {{Action: fakeprovider.ActionInvalidParam}},
		},
	})
	cfg, err := config.Parse([]byte(workertest.Config(workertest.ConfigOptions{BaseURL: baseURL, Output: "json", MaxAttempts: 6})), "test.toml")
	require.NoError(t, err)
	require.NoError(t, enqueue.Batch(ctx, db.Pool, db.Schema, cfg,
		enqueue.Params{Pipeline: workertest.Pipeline, Batch: "b1", Records: workertest.Records(5, nil)}))

	// The worker runs on its own pool, as a separate process would.
	pool, err := pgxpool.New(ctx, db.URL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	opts := workertest.WorkerOptions(cfg, db.Schema)
	store, err := keys.NewStore(pool, keys.StoreConfig{RiverSchema: db.Schema})
	require.NoError(t, err)
	m, err := metrics.New(pool, store,
		metrics.Options{Keys: []string{workertest.Key}, Logger: opts.Logger})
	require.NoError(t, err)
	opts.Pool, opts.Observer = pool, m
	rt, err := worker.New(opts)
	require.NoError(t, err)
	require.NoError(t, rt.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Stop(sctx)
	})

	st := workertest.WaitSettled(t, db.Pool, "b1", 30*time.Second)
	require.Equal(t, 4, st.Completed)
	require.Equal(t, 1, st.DeadLettered)

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
