package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
)

func init() {
	register(command{
		name:    "status",
		summary: "progress of one batch, or a table of all ([B] [--json])",
		run:     runStatus,
	})
}

// batchStatus reads one batch's status (its state derived by the ledger from
// the key's breaker, ledger.StateSQL) and its key's status, for saying why a
// batch is paused. An unknown batch is ledger.ErrNotFound.
func batchStatus(ctx context.Context, pool *pgxpool.Pool, store *keys.Store, id string) (ledger.Status, *keys.KeyStatus, error) {
	st, err := ledger.BatchStatus(ctx, pool, id)
	if err != nil {
		return ledger.Status{}, nil, err
	}
	ks, err := store.KeyStatus(ctx, st.Key)
	if err != nil {
		return ledger.Status{}, nil, err
	}
	return st, ks, nil
}

func runStatus(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage status", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	asJSON := fs.Bool("json", false, `print {"batch","pipeline","total","completed","dead_lettered","pending","calls","spend_usd","possibly_billed_usd","state","cancelled"} (an array without B); cancelled counts the dead letters of jobs cancelled or deleted by hand`)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: triage status [B] [--json]")
		fmt.Fprintln(e.stderr, "One batch's progress, or a table of every batch. state: running | settled | paused_exhausted | paused_budget.")
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) > 1 {
		fmt.Fprintf(e.stderr, "triage status: unexpected argument %q (one batch at a time)\n", pos[1])
		return exitUsage
	}
	_, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, "status", err)
	}
	defer d.Close()
	store := keys.NewStore(d.pool, keys.StoreConfig{})

	if len(pos) == 1 {
		st, ks, err := batchStatus(ctx, d.pool, store, pos[0])
		if errors.Is(err, ledger.ErrNotFound) {
			fmt.Fprintf(e.stderr, "triage status: no batch %q (`triage status` lists them)\n", pos[0])
			return exitUsage
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "triage status: %v\n", err)
			return exitRuntime
		}
		if *asJSON {
			return writeOrFail(e, "status", writeJSONLine(e.stdout, st))
		}
		b, err := ledger.GetBatch(ctx, d.pool, st.Batch)
		if err != nil {
			return failCmd(e, "status", err)
		}
		writeStatus(e.stdout, st, b, ks)
		return exitOK
	}

	list, err := ledger.ListBatches(ctx, d.pool)
	if err != nil {
		fmt.Fprintf(e.stderr, "triage status: %v\n", err)
		return exitRuntime
	}
	if *asJSON {
		if list == nil {
			list = []ledger.Status{}
		}
		return writeOrFail(e, "status", writeJSONLine(e.stdout, list))
	}
	if len(list) == 0 {
		fmt.Fprintln(e.stderr, "no batches yet (`triage enqueue` or `triage run` make one)")
		return exitOK
	}
	writeStatusTable(e.stdout, list)
	return exitOK
}

func writeOrFail(e *env, cmd string, err error) int {
	if err != nil {
		fmt.Fprintf(e.stderr, "triage %s: write: %v\n", cmd, err)
		return exitRuntime
	}
	return exitOK
}

// writeStatus prints one batch's status for a human: the contract's
// figures, the budget when the batch has one, and why it is paused.
func writeStatus(w io.Writer, st ledger.Status, b ledger.Batch, ks *keys.KeyStatus) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "batch:\t%s\n", st.Batch)
	fmt.Fprintf(tw, "pipeline:\t%s\n", st.Pipeline)
	fmt.Fprintf(tw, "state:\t%s\n", st.State)
	if why := pausedWhy(st, b, ks); why != "" {
		fmt.Fprintf(tw, "why:\t%s\n", why)
	}
	if b.BudgetUSD != nil {
		fmt.Fprintf(tw, "budget:\t%s\n", budgetLine(*b.BudgetUSD, b.SpentUSD))
	}
	fmt.Fprintf(tw, "total:\t%d\n", st.Total)
	fmt.Fprintf(tw, "completed:\t%d\n", st.Completed)
	fmt.Fprintf(tw, "dead-lettered:\t%d\n", st.DeadLettered)
	if st.Cancelled > 0 {
		fmt.Fprintf(tw, "cancelled by hand:\t%d (dead-lettered %s or %s; `triage dlq requeue --batch %s --reason %s` sends them again)\n",
			st.Cancelled, ledger.ReasonCancelledByHand, ledger.ReasonJobMissing, st.Batch, ledger.ReasonCancelledByHand)
	}
	fmt.Fprintf(tw, "pending:\t%d\n", st.Pending)
	fmt.Fprintf(tw, "calls:\t%d\n", st.Calls)
	fmt.Fprintf(tw, "spend:\t%s\n", usd(st.SpendUSD))
	fmt.Fprintf(tw, "possibly billed:\t%s\n", usd(st.PossiblyBilledUSD))
	tw.Flush()
}

// pausedWhy says why a paused batch is paused, "" when it is not: its key
// exhausted (since when, the next probe), or its budget reached (what was
// spent of what, and how to raise it).
func pausedWhy(st ledger.Status, b ledger.Batch, ks *keys.KeyStatus) string {
	switch st.State {
	case ledger.BatchPausedExhausted:
		if ks == nil {
			return "key " + b.Key + " exhausted"
		}
		return describeKey(ks)
	case ledger.BatchPausedBudget:
		s := "budget reached"
		if b.BudgetUSD != nil {
			s += fmt.Sprintf(": spent $%.4f of $%.4f", b.SpentUSD, *b.BudgetUSD)
		}
		return s + "; raise it with `triage batch budget " + st.Batch + " USD`"
	}
	return ""
}

// budgetLine is a budget's use: "$5.0000: $1.2500 used, $3.7500 left".
func budgetLine(budget, spent float64) string {
	return fmt.Sprintf("$%.4f: $%.4f used, $%.4f left", budget, spent, max(budget-spent, 0))
}

func writeStatusTable(w io.Writer, list []ledger.Status) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BATCH\tPIPELINE\tTOTAL\tCOMPLETED\tDEAD\tPENDING\tCALLS\tSPEND_USD\tSTATE")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.6f\t%s\n", s.Batch, s.Pipeline, s.Total, s.Completed,
			s.DeadLettered, s.Pending, s.Calls, s.SpendUSD, s.State)
	}
	tw.Flush()
}

// usd formats an amount of dollars with enough digits for per-call costs.
func usd(v float64) string { return fmt.Sprintf("$%.6f", v) }
