package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/operator"
)

func init() {
	register(command{
		name:    "wait",
		summary: "block until a batch settles and exit as `run` would (B [--timeout D])",
		run:     runWait,
	})
}

// waitPollEvery is how often `triage wait` reads the batch's status.
const waitPollEvery = 500 * time.Millisecond

func runWait(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage wait", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	timeout := fs.Duration("timeout", 0, "stop waiting after this long (0: until the batch settles)")
	setUsage(fs, e,
		"usage: triage wait B [--timeout D]",
		"Blocks until every record of batch B has a result or a dead letter, worked by any",
		"`triage work` or `triage run` of the fleet; it works nothing itself. Exit as `triage run`:",
		"0 settled; 3 settled with dead letters; 4 not settled (--timeout passed, its budget is",
		"spent, interrupted); 2 no batch B or bad usage; 1 the database failed.",
	)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		return failCmd(e, "wait", usageError{errors.New("want one batch: usage: triage wait B [--timeout D]")})
	}
	if *timeout < 0 {
		return failCmd(e, "wait", usageError{errors.New("--timeout must not be negative")})
	}
	id := pos[0]
	_, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, "wait", err)
	}
	defer d.Close()
	var deadline <-chan time.Time
	if *timeout > 0 {
		t := time.NewTimer(*timeout)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(waitPollEvery)
	defer tick.Stop()
	for {
		st, err := ledger.BatchStatus(ctx, d.pool, id)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			return failCmd(e, "wait", &operator.InputError{Err: fmt.Errorf("no batch %q (see `triage status`)", id)})
		case err != nil && ctx.Err() != nil:
			return waitStopped(e, id, "interrupted", ledger.Status{})
		case err != nil:
			return failCmd(e, "wait", err)
		}
		switch st.State {
		case ledger.BatchSettled:
			fmt.Fprintf(e.stderr, "batch %s settled: %d completed, %d dead-lettered of %d\n", id, st.Completed, st.DeadLettered, st.Total)
			return runOutcome{st: st}.exitCode()
		case ledger.BatchPausedBudget:
			return waitStopped(e, id, "its budget is spent (`triage batch budget "+id+" USD` raises it)", st)
		}
		select {
		case <-ctx.Done():
			return waitStopped(e, id, "interrupted", st)
		case <-deadline:
			return waitStopped(e, id, fmt.Sprintf("--timeout %s passed", *timeout), st)
		case <-tick.C:
		}
	}
}

// waitStopped says why `triage wait` stopped before the batch settled and
// returns run's code for it.
func waitStopped(e *env, id, why string, st ledger.Status) int {
	if st.Batch != "" {
		fmt.Fprintf(e.stderr, "triage wait: batch %s not settled: %s; %d of %d records pending (state %s)\n", id, why, st.Pending, st.Total, st.State)
	} else {
		fmt.Fprintf(e.stderr, "triage wait: batch %s not settled: %s\n", id, why)
	}
	return runOutcome{st: st, stopped: why}.exitCode()
}
