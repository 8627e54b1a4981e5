package keys

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for the logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAlerterWebhookLogAndRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)

	var (
		mu   sync.Mutex
		got  []webhookBody
		fail = true
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body webhookBody
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if fail { // the first POST fails: logged, not retried, nothing breaks
			fail = false
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		got = append(got, body)
	}))
	t.Cleanup(srv.Close)

	var logs syncBuffer
	a, err := NewAlerter(AlerterConfig{
		Logger:     slog.New(slog.NewJSONHandler(&logs, nil)),
		WebhookURL: srv.URL,
		Pool:       b.db.Pool,
		Clock:      b.clock,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(context.Background()) })

	a.Alert(ctx, Alert{Kind: AlertKeyExhausted, Key: "main", Message: "key main is exhausted", Fields: map[string]any{"vendor_code": "insufficient_quota"}})
	a.Alert(ctx, Alert{Kind: AlertKeyResumed, Key: "main", Message: "resumed by hand", ByHand: true})
	for range 5 {
		a.Alert(ctx, Alert{Kind: AlertBudgetReached, Batch: "b1", Message: "budget reached", Fields: map[string]any{"budget_usd": 5.0}})
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, a.Flush(fctx))

	mu.Lock()
	require.Len(t, got, 6)
	require.Equal(t, AlertKeyResumed, got[0].Kind)
	got = got[1:]
	require.Equal(t, AlertBudgetReached, got[0].Kind)
	require.Equal(t, "b1", got[0].Batch)
	require.Equal(t, 5.0, got[0].Fields["budget_usd"])
	require.Equal(t, b.clock.Now(), got[0].At)
	mu.Unlock()

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.Equal(t, "ERROR", first["level"])
	require.Equal(t, true, first["alert"])
	require.Equal(t, "key_exhausted", first["alert_kind"])
	require.Equal(t, "main", first["key"])
	require.Equal(t, "insufficient_quota", first["vendor_code"])
	require.Contains(t, logs.String(), "alert webhook failed")
	// The webhook's failure is logged by its sender as it happens, so it
	// may come before the second alert's line: find that line by its text.
	var second map[string]any
	for _, l := range lines[1:] {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		if m["msg"] == "resumed by hand" {
			second = m
			break
		}
	}
	require.NotNil(t, second, "the second alert is logged")
	require.Equal(t, "INFO", second["level"], "a person's own action is no error")
	require.Equal(t, true, second["alert"])

	var n int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM triage_alert`).Scan(&n))
	require.Equal(t, 7, n)
	var fields map[string]any
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT fields FROM triage_alert WHERE kind = 'key_exhausted' AND key = 'main'`).Scan(&fields))
	require.Equal(t, "insufficient_quota", fields["vendor_code"])

	require.NoError(t, a.Close(fctx))
	a.Alert(ctx, Alert{Kind: AlertUnknownError, Message: "after close"}) // logged only, no panic
	require.NoError(t, a.Flush(fctx))
}

func TestAlerterNeverBlocksOnSlowWebhook(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)

	var logs syncBuffer
	a, err := NewAlerter(AlerterConfig{
		Logger:     slog.New(slog.NewJSONHandler(&logs, nil)),
		WebhookURL: srv.URL,
		QueueSize:  2,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	t.Cleanup(func() { close(release) }) // runs first

	// The sender is stuck on the first POST; the queue holds 2; the rest are
	// dropped with a warning, and Alert returns at once every time.
	for range 10 {
		a.Alert(context.Background(), Alert{Kind: AlertUnknownError, Message: "x"})
	}
	require.Contains(t, logs.String(), "alert webhook queue full")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, a.Flush(ctx), context.Canceled)
}

func TestAlerterWithoutWebhook(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	a, err := NewAlerter(AlerterConfig{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	require.NoError(t, err)
	a.Alert(context.Background(), Alert{Kind: AlertPrepaid70, Key: "main"})
	require.NoError(t, a.Flush(context.Background()))
	require.NoError(t, a.Close(context.Background()))
	require.Contains(t, logs.String(), `"alert_kind":"prepaid_70"`)
}
