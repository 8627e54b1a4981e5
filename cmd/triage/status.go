package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/operator"
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
	asJSON := fs.Bool("json", false, `print {"batch","pipeline","total","completed","dead_lettered","pending","calls","spend_usd","possibly_billed_usd","state","cancelled","models","fallback"} (an array without B); cancelled counts the dead letters of jobs cancelled or deleted by hand; models the completed records by the model that answered; fallback the records moved to a fallback model`)
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
	if d.shadow != "" {
		fmt.Fprintf(e.stderr, "database: %s\n", d.where)
	}

	if len(pos) == 1 {
		v, err := operator.GetBatch(ctx, d.pool, pos[0])
		if err != nil {
			return failCmd(e, "status", err)
		}
		if *asJSON {
			return writeOrFail(e, "status", writeJSONLine(e.stdout, v.Status))
		}
		writeStatus(e.stdout, v.Status, v.Batch, v.Key)
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
	fmt.Fprintf(tw, "batch:\t%s\n", safe(st.Batch))
	fmt.Fprintf(tw, "pipeline:\t%s\n", safe(st.Pipeline))
	fmt.Fprintf(tw, "state:\t%s\n", st.State)
	if why := operator.PausedWhy(st, b, ks); why != "" {
		fmt.Fprintf(tw, "why:\t%s\n", safe(why))
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
	if st.Fallback > 0 || len(st.Models) > 1 {
		fmt.Fprintf(tw, "answered by:\t%s (%d moved to a fallback)\n", safe(modelCounts(st.Models)), st.Fallback)
	}
	fmt.Fprintf(tw, "pending:\t%d\n", st.Pending)
	fmt.Fprintf(tw, "calls:\t%d\n", st.Calls)
	fmt.Fprintf(tw, "spend:\t%s\n", usd(st.SpendUSD))
	fmt.Fprintf(tw, "possibly billed:\t%s\n", usd(st.PossiblyBilledUSD))
	tw.Flush()
}

// modelCounts is "gpt-4o: 80, gpt-4o-mini: 20", by name.
func modelCounts(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", name, m[name]))
	}
	return strings.Join(parts, ", ")
}

// budgetLine is a budget's use: "$5.0000: $1.2500 used, $3.7500 left".
func budgetLine(budget, spent float64) string {
	return fmt.Sprintf("$%.4f: $%.4f used, $%.4f left", budget, spent, max(budget-spent, 0))
}

func writeStatusTable(w io.Writer, list []ledger.Status) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BATCH\tPIPELINE\tTOTAL\tCOMPLETED\tDEAD\tPENDING\tCALLS\tSPEND_USD\tSTATE")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.6f\t%s\n", cell(s.Batch), cell(s.Pipeline), s.Total, s.Completed,
			s.DeadLettered, s.Pending, s.Calls, s.SpendUSD, s.State)
	}
	tw.Flush()
}

// usd formats an amount of dollars with enough digits for per-call costs.
func usd(v float64) string { return fmt.Sprintf("$%.6f", v) }
