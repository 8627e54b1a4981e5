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
)

func init() {
	register(command{
		name:    "batch",
		summary: "change a batch: `batch budget B USD` sets its spend cap and resumes it",
		run:     runBatch,
	})
}

const batchUsage = "usage: triage batch budget B USD   # USD 0: no cap"

func runBatch(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, batchUsage)
		return exitUsage
	}
	switch sub := args[0]; sub {
	case "budget":
		return runBatchBudget(ctx, e, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(e.stdout, batchUsage)
		return exitOK
	default:
		fmt.Fprintf(e.stderr, "triage batch: unknown subcommand %q (want budget)\n%s\n", sub, batchUsage)
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
