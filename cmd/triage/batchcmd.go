package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/operator"
)

func init() {
	register(command{
		name:    "batch",
		summary: "change a batch: `batch budget B USD` sets its spend cap and resumes it; `batch cancel B` cancels its provider batches",
		run:     runBatch,
	})
}

const batchUsage = `usage: triage batch budget B USD   # USD 0: no cap
       triage batch cancel B       # cancel B's provider batches (mode = "batch" | "auto")`

// batchCancelHelp is what `triage batch cancel` does, for --help.
const batchCancelHelp = `Asks for every provider batch in flight that holds lines of batch B to be
cancelled at the provider. The key's batch submitter (in a running
` + "`triage work`" + ` or ` + "`triage run`" + `) sends the cancel; the lines the provider
never ran go back to the queue once it confirms, so nothing is lost and
nothing answered is paid twice. Back in the queue they are sent again (mode
"batch": in the key's next provider batch; "auto" near the deadline: sync
calls): a cancel does not stop the records; to stop them for good, cancel
their River jobs too. Exit 0 also when B has no provider batch in flight; 2
when there is no batch B.`

func runBatch(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, batchUsage)
		return exitUsage
	}
	switch sub := args[0]; sub {
	case "budget":
		return runBatchBudget(ctx, e, args[1:])
	case "cancel":
		return runBatchCancel(ctx, e, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(e.stdout, batchUsage)
		fmt.Fprintln(e.stdout)
		fmt.Fprintln(e.stdout, "batch cancel: "+batchCancelHelp)
		return exitOK
	default:
		fmt.Fprintf(e.stderr, "triage batch: unknown subcommand %q (want budget or cancel)\n%s\n", sub, batchUsage)
		return exitUsage
	}
}

// parseUSD reads a non-negative, finite dollar amount ("5", "12.50", "$3").
func parseUSD(s string) (float64, error) {
	t := s
	if len(t) > 0 && t[0] == '$' {
		t = t[1:]
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, usageError{fmt.Errorf("USD %q is not a non-negative amount of dollars (e.g. 25 or 12.50)", s)}
	}
	return v, nil
}

func runBatchBudget(ctx context.Context, e *env, args []string) int {
	const cmd = "batch budget"
	fs := flag.NewFlagSet("triage batch budget", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprintln(e.stderr, batchUsage) }
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 2 {
		return failCmd(e, cmd, usageError{errors.New("want a batch and an amount: " + batchUsage)})
	}
	id := pos[0]
	usd, err := parseUSD(pos[1])
	if err != nil {
		return failCmd(e, cmd, err)
	}
	// 0 means no cap, as budget_usd = 0 does in triage.toml.
	var budget *float64
	if usd > 0 {
		budget = &usd
	}
	_, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer d.Close()

	before, err := ledger.GetBatch(ctx, d.pool, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return failCmd(e, cmd, usageError{fmt.Errorf("no batch %q (see `triage status`)", id)})
	}
	if err != nil {
		return failCmd(e, cmd, err)
	}
	if err := ledger.SetBatchBudget(ctx, d.pool, id, budget); errors.Is(err, ledger.ErrNotFound) {
		return failCmd(e, cmd, usageError{fmt.Errorf("no batch %q (see `triage status`)", id)})
	} else if err != nil {
		return failCmd(e, cmd, err)
	}
	// Jobs parked at the old cap wake now, not when their snooze ends.
	if _, err := worker.WakeBatch(ctx, d.pool, "", id); err != nil {
		return failCmd(e, cmd, err)
	}
	after, err := ledger.GetBatch(ctx, d.pool, id)
	if err != nil {
		return failCmd(e, cmd, err)
	}

	capText := "no spend cap"
	if after.BudgetUSD != nil {
		capText = fmt.Sprintf("spend cap $%.2f", *after.BudgetUSD)
	}
	fmt.Fprintf(e.stdout, "batch %s: %s (spent $%.4f so far)\n", id, capText, after.SpentUSD)
	if before.State == ledger.BatchPausedBudget && after.State != ledger.BatchPausedBudget {
		fmt.Fprintf(e.stdout, "batch %s was paused by its budget and is running again\n", id)
	}
	if after.BudgetUSD != nil && after.SpentUSD >= *after.BudgetUSD {
		fmt.Fprintf(e.stderr, "triage batch budget: warning: batch %s has already spent $%.4f, at or over the new cap\n", id, after.SpentUSD)
	}
	return exitOK
}

func runBatchCancel(ctx context.Context, e *env, args []string) int {
	const cmd = "batch cancel"
	fs := flag.NewFlagSet("triage batch cancel", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: triage batch cancel B")
		fmt.Fprintln(e.stderr, batchCancelHelp)
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		return failCmd(e, cmd, usageError{errors.New("want one batch: usage: triage batch cancel B")})
	}
	id := pos[0]
	_, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer d.Close()
	reqs, err := operator.CancelProviderBatches(ctx, d.pool, id)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	if len(reqs) == 0 {
		// Lines written but not sent yet are what a user cancelling early
		// expects to stop: say they will go out, and how to stop them.
		if st, err := ledger.BatchStatus(ctx, d.pool, id); err == nil && st.BatchLinesUnsent > 0 {
			n := st.BatchLinesUnsent
			fmt.Fprintf(e.stdout, "batch %s: no provider batch in flight yet, nothing to cancel: %d %s to be sent in the key's next provider batch "+
				"(a cancel does not stop %s; to stop the records, cancel their River jobs; `triage status %s`)\n",
				id, n, plural(n, "line waits", "lines wait"), plural(n, "it", "them"), id)
			return exitOK
		}
		fmt.Fprintf(e.stdout, "batch %s: no provider batches in flight, nothing to cancel (its records go through sync calls or wait for the next provider batch; `triage status %s`)\n", id, id)
		return exitOK
	}
	what := "1 provider batch"
	if len(reqs) != 1 {
		what = fmt.Sprintf("%d provider batches", len(reqs))
	}
	fmt.Fprintf(e.stdout, "batch %s: cancel requested for %s (%s); their unfinished lines go back to the queue when the provider confirms\n",
		id, what, safe(operator.CancelNames(reqs)))
	return exitOK
}
