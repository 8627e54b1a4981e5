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

// batchState is the contract's state of a batch: settled once completed +
// dead_lettered = total; paused_exhausted while its key's breaker is not
// closed (the breaker, shared by the fleet, is the truth, not the state the
// batch last stored); paused_budget as stored; else running.
func batchState(st ledger.Status, ks *keys.KeyStatus) ledger.BatchState {
	switch {
	case st.State == ledger.BatchSettled:
		return ledger.BatchSettled
	case ks != nil && ks.State != keys.StateClosed:
		return ledger.BatchPausedExhausted
	case st.State == ledger.BatchPausedBudget:
		return ledger.BatchPausedBudget
	default:
		return ledger.BatchRunning
	}
}

// batchStatus reads one batch's status with the state derived by batchState,
// and its key's status. An unknown batch is ledger.ErrNotFound.
func batchStatus(ctx context.Context, pool *pgxpool.Pool, store *keys.Store, id string) (ledger.Status, *keys.KeyStatus, error) {
	st, err := ledger.BatchStatus(ctx, pool, id)
	if err != nil {
		return ledger.Status{}, nil, err
	}
	b, err := ledger.GetBatch(ctx, pool, id)
	if err != nil {
		return ledger.Status{}, nil, err
	}
	ks, err := store.KeyStatus(ctx, b.Key)
	if err != nil {
		return ledger.Status{}, nil, err
	}
	st.State = batchState(st, ks)
	return st, ks, nil
}

func runStatus(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage status", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	asJSON := fs.Bool("json", false, `print {"batch","pipeline","total","completed","dead_lettered","pending","calls","spend_usd","possibly_billed_usd","state"} (an array without B)`)
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
	cfg, err := loadConfigOptional(e)
	if err != nil {
		fmt.Fprintf(e.stderr, "triage status: %v\n", err)
		return exitFor(err)
	}
	d, err := openDB(ctx, e, cfg)
	if err != nil {
		fmt.Fprintf(e.stderr, "triage status: %v\n", err)
		return exitFor(err)
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
		writeStatus(e.stdout, st, ks)
		return exitOK
	}

	list, err := ledger.ListBatches(ctx, d.pool)
	if err != nil {
		fmt.Fprintf(e.stderr, "triage status: %v\n", err)
		return exitRuntime
	}
	keyStates, err := store.ListKeyStatus(ctx)
	if err != nil {
		fmt.Fprintf(e.stderr, "triage status: %v\n", err)
		return exitRuntime
	}
	byKey := map[string]*keys.KeyStatus{}
	for i := range keyStates {
		byKey[keyStates[i].Key] = &keyStates[i]
	}
	for i := range list {
		if list[i].State == ledger.BatchSettled {
			continue
		}
		// ledger.Status does not name the batch's key.
		b, err := ledger.GetBatch(ctx, d.pool, list[i].Batch)
		if err != nil {
			fmt.Fprintf(e.stderr, "triage status: %v\n", err)
			return exitRuntime
		}
		list[i].State = batchState(list[i], byKey[b.Key])
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

func writeStatus(w io.Writer, st ledger.Status, ks *keys.KeyStatus) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "batch:\t%s\n", st.Batch)
	fmt.Fprintf(tw, "pipeline:\t%s\n", st.Pipeline)
	fmt.Fprintf(tw, "state:\t%s\n", st.State)
	if ks != nil && st.State == ledger.BatchPausedExhausted {
		fmt.Fprintf(tw, "\t%s\n", describeKey(ks))
	}
	fmt.Fprintf(tw, "total:\t%d\n", st.Total)
	fmt.Fprintf(tw, "completed:\t%d\n", st.Completed)
	fmt.Fprintf(tw, "dead-lettered:\t%d\n", st.DeadLettered)
	fmt.Fprintf(tw, "pending:\t%d\n", st.Pending)
	fmt.Fprintf(tw, "calls:\t%d\n", st.Calls)
	fmt.Fprintf(tw, "spend:\t%s\n", usd(st.SpendUSD))
	fmt.Fprintf(tw, "possibly billed:\t%s\n", usd(st.PossiblyBilledUSD))
	tw.Flush()
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
