package workertest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/operator"
)

// Provider serves a fake provider with scenario sc until the test ends and
// returns it with its base URL for ConfigOptions.BaseURL. Set sc.APIKey
// first (APIKey, or the key the test's Getenv returns).
func Provider(t testing.TB, sc fakeprovider.Scenario) (*fakeprovider.Server, string) {
	t.Helper()
	fake := fakeprovider.New(sc)
	srv := httptest.NewServer(fake)
	t.Cleanup(func() { fake.Close(); srv.Close() })
	return fake, srv.URL + "/v1"
}

// WorkerOptions are worker.Options for a test: cfg in schema, the API key
// from APIKeyEnv, logs discarded, and backoffs, waits and ticks short enough
// that a batch settles in seconds. Set Pool (and anything else) before
// worker.New.
func WorkerOptions(cfg *config.Config, schema string) worker.Options {
	return worker.Options{
		Config: cfg, Schema: schema,
		Getenv:            func(k string) string { return map[string]string{APIKeyEnv: APIKey}[k] },
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		BackoffBase:       10 * time.Millisecond,
		BackoffCap:        100 * time.Millisecond,
		ThrottleWait:      50 * time.Millisecond,
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		SupervisorTick:    25 * time.Millisecond,
	}
}

// Requeue is worker.Options.RequeueDeadLetters as `triage work` sets it:
// the operator's requeue of dead letters by id.
func Requeue(cfg *config.Config, pool *pgxpool.Pool) func(ctx context.Context, ids []int64) (int, error) {
	return func(ctx context.Context, ids []int64) (int, error) {
		res, err := operator.Requeue(ctx, pool, cfg, operator.Selection{IDs: ids}, operator.RequeueOptions{By: "safety_net"})
		return res.Requeued, err
	}
}
