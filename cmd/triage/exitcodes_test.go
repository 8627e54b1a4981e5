package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// `work --exit-when-idle` interrupted with jobs left exits 4, as `run`
// does, and says what is left (issue 24: it exited 0 with 17 of 30
// records pending, so `work && export && notify` reported success).
func TestWorkExitWhenIdleInterruptedWithWorkLeftExits4(t *testing.T) {
	t.Parallel()
	// Every call finds the key exhausted: the jobs stay queued.
	c := newCLI(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}}, "")
	r := c.run(jsonl(3), "enqueue", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitOK, r.code, r.stderr)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errw := &signalWriter{want: `"msg":"working"`, seen: make(chan struct{})}
	e := &env{stdout: &bytes.Buffer{}, stderr: errw, getenv: func(k string) string { return c.envs[k] }}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"--config", c.config, "work", "--exit-when-idle"}, e) }()
	wait, cancelWait := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelWait()
	require.NoError(t, c.fake.WaitFor(wait, func(s fakeprovider.Stats) bool { return s.Requests > 0 }), errw.String())
	cancel() // SIGTERM
	select {
	case code := <-done:
		require.Equal(t, exitQueued, code, errw.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("work did not stop: %s", errw.String())
	}
	require.Contains(t, errw.String(), "stopped with 3 jobs left")
}
