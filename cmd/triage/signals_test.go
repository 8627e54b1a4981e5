package main

import (
	"context"
	"github.com/triage-dev/triage/worker/workertest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSecondInterruptForcesTheStop(t *testing.T) {
	t.Parallel()
	sigs := make(chan os.Signal, 2)
	stderr := &workertest.Buffer{}
	exited := make(chan int, 1)
	ctx, stop := interruptible(context.Background(), sigs, stderr, func(code int) { exited <- code })
	defer stop()

	sigs <- os.Interrupt
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first interrupt did not end the context")
	}
	require.Empty(t, exited, "the first interrupt stops gracefully")
	sigs <- syscall.SIGTERM
	select {
	case code := <-exited:
		require.Equal(t, exitQueued, code)
	case <-time.After(10 * time.Second):
		t.Fatal("the second interrupt did not force the stop")
	}
	require.Contains(t, stderr.String(), "interrupt again to stop at once")
	require.Contains(t, stderr.String(), "possibly billed")
	require.Equal(t, 2, strings.Count(stderr.String(), "\n"))
}
