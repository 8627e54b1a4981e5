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

// interruptWork runs `triage --config <config> work args...` in-process,
// interrupts it (SIGINT/SIGTERM: its context is cancelled) once it is
// working and the fake provider's stats meet until, and returns its exit
// code and what it logged.
func (c *cli) interruptWork(t *testing.T, until func(fakeprovider.Stats) bool, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errw := &signalWriter{want: `"msg":"working"`, seen: make(chan struct{})}
	seen := errw.seen
	e := &env{stdout: &bytes.Buffer{}, stderr: errw, getenv: func(k string) string { return c.envs[k] }}
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"--config", c.config, "work"}, args...), e) }()
	select {
	case <-seen:
	case <-time.After(30 * time.Second):
		t.Fatalf("work did not start: %s", errw.String())
	}
	wait, cancelWait := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelWait()
	require.NoError(t, c.fake.WaitFor(wait, until), errw.String())
	cancel()
	select {
	case code := <-done:
		return code, errw.String()
	case <-time.After(90 * time.Second):
		t.Fatalf("work did not stop: %s", errw.String())
		return 0, ""
	}
}

func TestWorkStopsOnInterrupt(t *testing.T) {
	t.Parallel()
	// Every call finds the key exhausted: the jobs stay queued, so only the
	// interrupt ends the process.
	c := newCLI(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}}, "")
	r := c.run(jsonl(3), "enqueue", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitOK, r.code, r.stderr)

	code, logged := c.interruptWork(t, func(s fakeprovider.Stats) bool { return s.Requests > 0 })
	require.Equal(t, exitOK, code, logged)
	require.Contains(t, logged, "stopping")
	require.Equal(t, 3, c.jobs("available", "scheduled", "retryable"), "the jobs stay queued for the next worker")
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

// Fault 2: SIGTERM (here: the interrupt) with calls in flight to a model
// that takes longer than the old fixed 15 s grace to answer. The provider
// bills each call when the model is done, whether or not the client still
// waits, and does not replay: a call cut by the stop would be paid and sent
// again. The stop waits for them (the grace covers the key's timeout) and
// their answers are stored.
func TestWorkLetsCallsInFlightFinishOnInterrupt(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{NoReplay: true, GenerationTime: fakeprovider.Duration(16 * time.Second)}, "")
	dlqRewriteConfig(t, c, `timeout = "5s"`, `timeout = "30s"`)
	r := c.run(jsonl(2), "enqueue", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitOK, r.code, r.stderr)

	code, logged := c.interruptWork(t, func(s fakeprovider.Stats) bool { return s.InFlight == 2 })
	require.Equal(t, exitOK, code, logged)
	st := c.fake.Stats()
	require.Zero(t, st.BilledAfterClientLeft, "no paid call was cut by the stop")
	require.Equal(t, 2, st.BilledCalls)
	require.Equal(t, 2, c.jobs("completed"), "the answers that arrived during the stop are stored")
}
