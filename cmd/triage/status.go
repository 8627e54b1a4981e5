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
// the key's breaker, ledger.BatchStatus) and its key's status, for saying why a
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
	asJSON := fs.Bool("json", false, `print {"batch","pipeline","total","completed","dead_lettered","pending","calls","spend_usd","possibly_billed_usd","state","cancelled","models","fallback"} (an array without B); cancelled counts the dead letters of jobs cancelled or deleted by hand; models the completed records by the model that answered; fallback the records moved to a fallback model. Only when the batch has them: "deadline"; "by_mode" [{"mode","calls","spend_usd","sync_cost_usd"}] and "batch_saved_usd" (batch-mode lines); "batch_reserved_usd" (the estimate of batch-mode lines waiting in provider batches, not in possibly_billed_usd); "batch_lines_unsent" (batch-mode lines in no provider batch yet); "provider_batches" [{"id","provider_batch_id","vendor","state","vendor_status","counts","lines","batch_lines","cancel_requested","age_s","expires_in_s",...}] (in flight); with B, "lost_answers" {"found","resent","dead_lettered","unknown"} (calls whose answer was lost, by how each was resolved)`)
	setUsage(fs, e,
		"usage: triage status [B] [--json]",
		"One batch's progress, or a table of every batch. state: running | settled | paused_exhausted | paused_budget | paused (by hand) | cancelled (by hand, calls in flight finishing).",
	)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) > 1 {
		fmt.Fprintf(e.stderr, "triage status: unexpected argument %q (one batch at a time)\n", pos[1])
		return exitUsage
	}
	cfg, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, "status", err)
	}
	defer d.Close()
	if d.shadow != "" {
		fmt.Fprintf(e.stderr, "database: %s\n", d.where)
	}

	if len(pos) == 1 {
		v, err := operator.GetBatchNow(ctx, d.pool, pos[0], operator.ActivityOptions{Config: cfg})
		if err != nil {
			return failCmd(e, "status", err)
		}
		if *asJSON {
			return writeOrFail(e, "status", writeJSONLine(e.stdout, v.Now()))
		}
		writeStatus(e.stdout, v)
		return exitOK
	}

	views, err := operator.ListBatchesNow(ctx, d.pool, operator.ActivityOptions{Config: cfg})
	if err != nil {
		fmt.Fprintf(e.stderr, "triage status: %v\n", err)
		return exitRuntime
	}
	if *asJSON {
		return writeOrFail(e, "status", writeJSONLine(e.stdout, operator.Nows(views)))
	}
	if len(views) == 0 {
		fmt.Fprintln(e.stderr, "no batches yet (`triage enqueue` or `triage run` make one)")
		return exitOK
	}
	writeStatusTable(e.stdout, views)
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
// figures, the budget when the batch has one, what is working it now and
// why it is paused or not progressing.
func writeStatus(w io.Writer, v operator.BatchView) {
	st, b := v.Status, v.Batch
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "batch:\t%s\n", safe(st.Batch))
	fmt.Fprintf(tw, "pipeline:\t%s\n", safe(st.Pipeline))
	fmt.Fprintf(tw, "state:\t%s\n", st.State)
	if why := v.Why(); why != "" {
		fmt.Fprintf(tw, "why:\t%s\n", safe(why))
	}
	if a := v.Activity; a != nil && st.State != ledger.BatchSettled {
		fmt.Fprintf(tw, "workers:\t%s\n", operator.DescribeWorkers(*a, st.Key))
		fmt.Fprintf(tw, "jobs:\t%s\n", operator.DescribeJobs(*a))
	}
	if b.BudgetUSD != nil {
		fmt.Fprintf(tw, "budget:\t%s\n", budgetLine(*b.BudgetUSD, b.SpentUSD))
	}
	if dl := (operator.BatchView{Status: st}).Deadline(); dl != "" {
		fmt.Fprintf(tw, "deadline:\t%s\n", dl)
	}
	fmt.Fprintf(tw, "total:\t%d\n", st.Total)
	fmt.Fprintf(tw, "completed:\t%d\n", st.Completed)
	fmt.Fprintf(tw, "dead-lettered:\t%d\n", st.DeadLettered)
	if st.Cancelled > 0 {
		fmt.Fprintf(tw, "cancelled by hand:\t%d (dead-lettered %s, %s or %s; `triage dlq requeue --batch %s --reason R` sends them again)\n",
			st.Cancelled, ledger.ReasonCancelled, ledger.ReasonCancelledByHand, ledger.ReasonJobMissing, st.Batch)
	}
	if st.Fallback > 0 || len(st.Models) > 1 {
		fmt.Fprintf(tw, "answered by:\t%s (%d moved to a fallback)\n", safe(modelCounts(st.Models)), st.Fallback)
	}
	fmt.Fprintf(tw, "pending:\t%d\n", st.Pending)
	fmt.Fprintf(tw, "calls:\t%d\n", st.Calls)
	fmt.Fprintf(tw, "spend:\t%s\n", usd(st.SpendUSD))
	writeModeSpend(tw, st.ByMode, st.BatchSavedUSD)
	fmt.Fprintf(tw, "possibly billed:\t%s\n", usd(st.PossiblyBilledUSD))
	if l := v.LostAnswers; l != nil {
		fmt.Fprintf(tw, "lost answers:\t%s\n", operator.DescribeLostAnswers(*l))
	}
	if st.StrayDuplicates > 0 {
		fmt.Fprintf(tw, "paid duplicates:\t%d %s, %s of the spend (run by a stray provider batch before its cancel; reason %s in `triage ledger`)\n",
			st.StrayDuplicates, plural(st.StrayDuplicates, "line", "lines"), usd(st.StrayDuplicateUSD), ledger.ReasonStrayDuplicate)
	}
	if st.BatchReservedUSD > 0 {
		fmt.Fprintf(tw, "in provider batches:\t%s (estimate of the lines waiting for their answer, at batch prices)\n", usd(st.BatchReservedUSD))
	}
	if st.BatchLinesUnsent > 0 {
		fmt.Fprintf(tw, "waiting to be sent:\t%d %s (the key's submitter gathers the lines into one provider batch, sent once no new line has come for a while)\n",
			st.BatchLinesUnsent, plural(st.BatchLinesUnsent, "line", "lines"))
	}
	tw.Flush()
	if len(st.ProviderBatches) > 0 {
		fmt.Fprintln(w, "\nprovider batches in flight:")
		writeProviderBatches(w, false, []ledger.Status{st})
	}
}

// writeModeSpend prints spend split by mode and the batch saving, under
// "spend:"; nothing for a batch with no batch-mode attempt.
func writeModeSpend(tw io.Writer, byMode []ledger.ModeUsage, saved *float64) {
	for _, m := range byMode {
		switch {
		case m.SyncCostUSD != nil:
			fmt.Fprintf(tw, "  %s:\t%s (%s; %s at sync prices)\n", m.Mode, usd(m.SpendUSD), count(m.Calls, "line", "lines"), usd(*m.SyncCostUSD))
		default:
			fmt.Fprintf(tw, "  %s:\t%s (%s)\n", m.Mode, usd(m.SpendUSD), count(m.Calls, "call", "calls"))
		}
	}
	if saved != nil {
		fmt.Fprintf(tw, "batch mode saved:\t%s\n", usd(*saved))
	}
}

// count is "1 call", "3 calls".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// writeProviderBatches prints the provider batches in flight of the
// batches in list, one row each; withBatch adds the triage batch's column
// (the table of every batch).
func writeProviderBatches(w io.Writer, withBatch bool, list []ledger.Status) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "PROVIDER ID\tVENDOR\tSTATE\tCOUNTS\tLINES\tAGE\tEXPIRES IN"
	if withBatch {
		head = "BATCH\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, st := range list {
		for _, p := range operator.ProviderRows(st) {
			if withBatch {
				fmt.Fprintf(tw, "%s\t", cell(p.Batch))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(p.ID), cell(p.Vendor), cell(p.State), cell(p.Counts),
				p.Lines, p.Age, p.ExpiresIn)
		}
	}
	tw.Flush()
	// A failing poll leaves the vendor's status stale; say why under the
	// table rather than widen it.
	for _, st := range list {
		for _, p := range st.ProviderBatches {
			if p.LastError != nil {
				fmt.Fprintf(w, "%s: the last request about it failed, retrying with backoff: %s\n", operator.ProviderID(p), safe(*p.LastError))
			}
		}
	}
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

// writeStatusTable prints every batch, one row each, with a short ACTIVITY
// (operator.ShortActivity; `triage status B` says it whole).
func writeStatusTable(w io.Writer, views []operator.BatchView) {
	list := operator.Statuses(views)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BATCH\tPIPELINE\tTOTAL\tCOMPLETED\tDEAD\tPENDING\tCALLS\tSPEND_USD\tSTATE\tACTIVITY")
	for i, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.6f\t%s\t%s\n", cell(s.Batch), cell(s.Pipeline), s.Total, s.Completed,
			s.DeadLettered, s.Pending, s.Calls, s.SpendUSD, s.State, cell(operator.ShortActivity(views[i].Activity, s)))
	}
	tw.Flush()
	if slices.ContainsFunc(list, func(s ledger.Status) bool { return len(s.ProviderBatches) > 0 }) {
		fmt.Fprintln(w, "\nprovider batches in flight:")
		writeProviderBatches(w, true, list)
	}
}

// usd formats an amount of dollars with enough digits for per-call costs.
func usd(v float64) string { return fmt.Sprintf("$%.6f", v) }
