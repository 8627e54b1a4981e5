package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

func TestWorkExitWhenIdle(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	r := c.run(jsonl(6), "enqueue", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitOK, r.code, r.stderr)

	r = c.run("", "work", "--exit-when-idle", "--keys", "main", "--metrics-addr", "127.0.0.1:0")
	require.Equal(t, exitOK, r.code, r.stderr)
	st, err := ledger.BatchStatus(context.Background(), c.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, ledger.BatchSettled, st.State)
	require.Equal(t, 6, st.Completed)
	require.Equal(t, 6, c.fake.Stats().Requests)

	// Nothing left: it exits at once.
	r = c.run("", "work", "--exit-when-idle")
	require.Equal(t, exitOK, r.code, r.stderr)
}

// signalWriter collects what is written and closes seen when want appears.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if w.seen != nil && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
		w.seen = nil
	}
	return n, err
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestWorkStopsOnInterrupt(t *testing.T) {
	t.Parallel()
	// Every call finds the key exhausted: the jobs stay queued, so only the
	// interrupt ends the process.
	c := newCLI(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}}, "")
	r := c.run(jsonl(3), "enqueue", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitOK, r.code, r.stderr)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errw := &signalWriter{want: `"msg":"working"`, seen: make(chan struct{})}
	seen := errw.seen
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: errw, getenv: func(k string) string { return c.envs[k] }}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"--config", c.config, "work"}, e) }()
	select {
	case <-seen:
	case <-time.After(30 * time.Second):
		t.Fatalf("work did not start: %s", errw.String())
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	require.NoError(t, c.fake.WaitFor(ctx2, func(s fakeprovider.Stats) bool { return s.Requests > 0 }))
	cancel() // SIGINT
	select {
	case code := <-done:
		require.Equal(t, exitOK, code, errw.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("work did not stop: %s", errw.String())
	}
	require.Contains(t, errw.String(), "stopping")
	var left int
	require.NoError(t, c.db.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM river_job WHERE state IN ('available', 'scheduled', 'retryable')").Scan(&left))
	require.Equal(t, 3, left, "the jobs stay queued for the next worker")
}

func TestWorkBadUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	for _, args := range [][]string{
		{"work", "--keys", "nope"},
		{"work", "--nope"},
		{"work", "extra"},
		{"--config", c.config + ".missing", "work"},
	} {
		r := c.run("", args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
	}
	// A bad listen address is bad usage, found before anything starts.
	for _, addr := range []string{"256.1.1.1:http-nope", "9090", "bad host:1"} {
		r := c.run("", "work", "--metrics-addr", addr)
		require.Equal(t, exitUsage, r.code, r.stderr)
		require.Contains(t, r.stderr, "--metrics-addr")
		require.NotContains(t, r.stderr, "River client started")
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	r := c.run("", "work", "--exit-when-idle", "--metrics-addr", busy.Addr().String())
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--metrics-addr")
	require.NotContains(t, r.stderr, "River client started", "the port in use is found before the worker starts")
}

func TestWorkWarnsWhenMetricsListenBeyondLoopback(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	r := c.run("", "work", "--exit-when-idle", "--metrics-addr", ":0")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "metrics listen beyond loopback")
	r = c.run("", "work", "--exit-when-idle", "--metrics-addr", "127.0.0.1:0")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NotContains(t, r.stderr, "beyond loopback")
}
