package workertest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/workertest"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	text := workertest.Config(workertest.ConfigOptions{BaseURL: "http://127.0.0.1:1/v1"})
	require.NotContains(t, text, "[alerts]", "no webhook, no extra alert lines: no table")
	require.NotContains(t, text, "max_attempts", "left for the test to add")
	cfg, err := config.Parse([]byte(text), "test.toml")
	require.NoError(t, err)
	require.Len(t, cfg.Keys, 1)
	k := cfg.Keys[0]
	require.Equal(t, workertest.Key, k.Name)
	require.Equal(t, "openai", k.Vendor)
	require.Equal(t, "http://127.0.0.1:1/v1", k.BaseURL)
	require.Equal(t, workertest.APIKeyEnv, k.APIKeyEnv)
	require.Equal(t, 4, k.Concurrency)
	require.Equal(t, 5*time.Second, k.Timeout)
	require.Equal(t, 500*time.Millisecond, k.ProbeInterval)
	require.Len(t, cfg.Pipelines, 1)
	p := cfg.Pipelines[0]
	require.Equal(t, workertest.Pipeline, p.Name)
	require.Equal(t, config.OutputDefault, p.Output)
	require.Equal(t, config.MaxAttemptsDefault, p.MaxAttempts)
	require.Empty(t, cfg.Alerts.WebhookURL)
}

func TestConfigKnobs(t *testing.T) {
	t.Parallel()
	text := workertest.Config(workertest.ConfigOptions{
		BaseURL: "http://127.0.0.1:1/v1", Vendor: "anthropic", Concurrency: 2, Timeout: "300ms", ProbeInterval: "1m",
		MaxAttempts: 3, Output: "text", WebhookURL: "http://127.0.0.1:2/hook",
		ExtraAlerts: "max_usd_per_hour = 5\n", ExtraKey: "retry_budget = 0.5\n", ExtraPipeline: "max_tokens = 60\n",
	})
	cfg, err := config.Parse([]byte(text), "test.toml")
	require.NoError(t, err)
	k, p := cfg.Keys[0], cfg.Pipelines[0]
	require.Equal(t, "anthropic", k.Vendor)
	require.Equal(t, 2, k.Concurrency)
	require.Equal(t, 300*time.Millisecond, k.Timeout)
	require.Equal(t, time.Minute, k.ProbeInterval)
	require.Equal(t, 0.5, k.RetryBudget)
	require.Equal(t, 3, p.MaxAttempts)
	require.Equal(t, config.OutputText, p.Output)
	require.Equal(t, 60, p.MaxTokens)
	require.Equal(t, "http://127.0.0.1:2/hook", cfg.Alerts.WebhookURL)
	require.Equal(t, 5.0, cfg.Alerts.MaxUSDPerHour)
}

func TestRecordsAndJSONL(t *testing.T) {
	t.Parallel()
	recs := workertest.Records(3, func(i int) string {
		if i == 1 {
			return `,"note":"x"`
		}
		return ""
	})
	require.Len(t, recs, 3)
	for i, r := range recs {
		require.Equal(t, i+1, r.Line)
		require.True(t, json.Valid(r.Data), string(r.Data))
	}
	require.Equal(t, "r002", recs[1].ID)
	require.JSONEq(t, `{"id":"r002","name":"name 2","note":"x"}`, string(recs[1].Data))

	lines := strings.Split(strings.TrimSuffix(workertest.JSONL(2), "\n"), "\n")
	require.Equal(t, []string{`{"id":"r001","name":"name 1"}`, `{"id":"r002","name":"name 2"}`}, lines)
}

func TestWebhookCountsByKind(t *testing.T) {
	t.Parallel()
	var hook workertest.Webhook
	srv := httptest.NewServer(&hook)
	t.Cleanup(srv.Close)
	for _, kind := range []string{"key_exhausted", "key_resumed", "key_exhausted"} {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"kind":"`+kind+`"}`))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
	}
	require.Equal(t, 2, hook.Count("key_exhausted"))
	require.Equal(t, 1, hook.Count("key_resumed"))
	require.Equal(t, 0, hook.Count("budget_reached"))
	require.Equal(t, 3, strings.Count(hook.All(), `"kind"`))
}

func TestEventuallyReturnsOnceTrue(t *testing.T) {
	t.Parallel()
	calls := 0
	workertest.Eventually(t, 5*time.Second, "the third check", func() bool { calls++; return calls == 3 })
	require.Equal(t, 3, calls)
}

// fatalRecorder stands in for the test in Eventually's failure path: it
// records the message and ends its goroutine, as t.Fatalf does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestEventuallyFailsAtTheDeadline(t *testing.T) {
	t.Parallel()
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		workertest.Eventually(rec, 50*time.Millisecond, "never", func() bool { return false })
	}()
	<-done
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	require.Equal(t, "timed out after 50ms waiting for: never", rec.msg)
}
