package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

// interruptible returns a context that ends at the first signal on sigs
// (SIGINT, SIGTERM): commands then stop gracefully, calls in flight
// finishing first. A second signal does not wait: it warns that calls still
// in flight stay possibly billed and exits at once with exitQueued (their
// jobs stay in the queue). stop ends the watch.
func interruptible(parent context.Context, sigs <-chan os.Signal, stderr io.Writer, exit func(int)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	quit := make(chan struct{})
	go func() {
		select {
		case <-sigs:
		case <-quit:
			return
		}
		fmt.Fprintln(stderr, "triage: interrupted: calls in flight finish first (interrupt again to stop at once)")
		cancel()
		select {
		case <-sigs:
		case <-quit:
			return
		}
		fmt.Fprintln(stderr, "triage: second interrupt: stopping now. Calls still in flight stay possibly billed "+
			"(`triage ledger` counts them); their jobs stay queued and River's rescuer hands them back to a worker")
		exit(exitQueued)
	}()
	return ctx, func() { close(quit); cancel() }
}
