package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
)

func init() {
	register(command{
		name:    "ledger",
		summary: "calls, tokens, spend, possibly billed and retries by class ([--batch B] [--key K] [--json])",
		run:     runLedger,
	})
}

// classInFlight labels attempts with no outcome yet (intent rows).
const classInFlight = "in_flight"

// usageByClass reads what the calls matching f came to, summed in the
// database: the total, and the same per classifier class in the
// classifier's order (ok, ok_unreadable: an ok left possibly billed,
// transient, throttled, exhausted, rejected, ambiguous), then any other
// label; attempts with no class yet are
// classInFlight. The sums are rounded to drop float noise (1e-12 USD is far
// below any price).
func usageByClass(ctx context.Context, d *db, f ledger.AttemptFilter) (total ledger.ClassUsage, byClass []ledger.ClassUsage, err error) {
	total, byClass, err = ledger.UsageByClass(ctx, d.pool, f)
	if err != nil {
		return total, nil, err
	}
	rank := map[string]int{}
	for i, c := range []string{classify.OK.String(), ledger.ClassUnreadableOK, classify.Transient.String(), classify.Throttled.String(),
		classify.Exhausted.String(), classify.Rejected.String(), classify.Ambiguous.String()} {
		rank[c] = i + 1
	}
	for i := range byClass {
		if byClass[i].Class == "" {
			byClass[i].Class = classInFlight
		}
		byClass[i] = roundUsage(byClass[i])
	}
	slices.SortStableFunc(byClass, func(a, b ledger.ClassUsage) int {
		ra, rb := rank[a.Class], rank[b.Class]
		if ra == 0 {
			ra = len(rank) + 1
		}
		if rb == 0 {
			rb = len(rank) + 1
		}
		if ra != rb {
			return ra - rb
		}
		return strings.Compare(a.Class, b.Class)
	})
	return roundUsage(total), byClass, nil
}

func roundUsage(u ledger.ClassUsage) ledger.ClassUsage {
	u.SpendUSD = math.Round(u.SpendUSD*1e12) / 1e12
	u.PossiblyBilledUSD = math.Round(u.PossiblyBilledUSD*1e12) / 1e12
	u.BatchReservedUSD = math.Round(u.BatchReservedUSD*1e12) / 1e12
	return u
}

// ledgerReport is `triage ledger --json`: the filters (null when not given),
// the totals, and the same sums per class.
type ledgerReport struct {
	Batch *string `json:"batch"`
	Key   *string `json:"key"`
	ledger.ClassUsage
	ByClass []ledger.ClassUsage `json:"by_class"`
	// Partials are the attempts whose stream was cut midway, newest first.
	Partials []ledger.PartialAttempt `json:"partials"`
	// ByModel: which model made the calls and answered the records (a
	// fallback's calls are on its own model and key).
	ByModel []ledger.ModelUsage `json:"by_model"`
	// ByMode splits the calls into sync calls and provider-batch lines,
	// and BatchSavedUSD is what the lines cost less than sync; both
	// omitted when no call went through a provider batch.
	ByMode        []ledger.ModeUsage `json:"by_mode,omitempty"`
	BatchSavedUSD *float64           `json:"batch_saved_usd,omitempty"`
	// PossiblyDoubleBilled counts the records that may have been paid for
	// twice (a lost answer, and another send that may have been billed);
	// Ambiguity says it per key, with the key's ambiguous policy.
	PossiblyDoubleBilled int              `json:"possibly_double_billed"`
	Ambiguity            []ambiguityOfKey `json:"ambiguity"`
}

// ambiguityOfKey is ledger.Ambiguity with the key's ambiguous policy from
// triage.toml ("" when the key is not in the file, or there is none).
type ambiguityOfKey struct {
	ledger.Ambiguity
	Policy string `json:"policy"`
}

// ambiguityOf reads how lost answers came out per key, with each key's
// policy, and the records possibly billed twice in all.
func ambiguityOf(ctx context.Context, d *db, cfg *config.Config, f ledger.AttemptFilter) ([]ambiguityOfKey, int, error) {
	amb, err := ledger.AmbiguityByKey(ctx, d.pool, f)
	if err != nil {
		return nil, 0, err
	}
	out, total := make([]ambiguityOfKey, 0, len(amb)), 0
	for _, a := range amb {
		k := ambiguityOfKey{Ambiguity: a}
		if cfg != nil {
			if kc, err := cfg.Key(a.Key); err == nil {
				k.Policy = string(kc.Ambiguous)
			}
		}
		total += a.PossiblyDoubleBilled
		out = append(out, k)
	}
	return out, total, nil
}

func runLedger(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage ledger", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	batch := fs.String("batch", "", "only this batch's calls")
	key := fs.String("key", "", "only this key's calls")
	calls := fs.Bool("calls", false, "list the calls themselves (newest first), each with how its request was changed, instead of the sums")
	record := fs.String("record", "", "with --batch: only this record's calls (implies --calls)")
	asJSON := fs.Bool("json", false, `print {"batch","key","calls","records","retries","input_tokens","output_tokens","spend_usd","possibly_billed_usd","by_class":[...],"by_model":[{"model","key","calls","answered","spend_usd"}]}; with provider-batch lines also "by_mode":[{"mode","calls","spend_usd","sync_cost_usd"}] and "batch_saved_usd", and "batch_reserved_usd" (lines waiting in provider batches, not in possibly_billed_usd); "possibly_double_billed" (records) and "ambiguity":[{"key","policy","unanswered","found_by_lookup","possibly_double_billed"}]`)
	setUsage(fs, e,
		"usage: triage ledger [--batch B [--record R]] [--key K] [--calls] [--json]",
		"What the calls came to, by classifier class: calls, records, retries, tokens, spend and",
		"possibly billed (sent, no answer: the provider may have billed it).",
	)
	if code, ok := parseNoArgs(e, "ledger", fs, args); !ok {
		return code
	}
	cfg, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, "ledger", err)
	}
	defer d.Close()
	if *batch != "" {
		if _, err := ledger.GetBatch(ctx, d.pool, *batch); errors.Is(err, ledger.ErrNotFound) {
			fmt.Fprintf(e.stderr, "triage ledger: no batch %q (`triage status` lists them)\n", *batch)
			return exitUsage
		}
	}
	if *record != "" {
		if *batch == "" {
			fmt.Fprintln(e.stderr, "triage ledger: --record needs --batch (record ids are per batch)")
			return exitUsage
		}
		*calls = true
	}
	if *calls {
		return ledgerCalls(ctx, e, d, ledger.AttemptFilter{Batch: *batch, Key: *key, RecordID: *record}, *asJSON)
	}
	total, byClass, err := usageByClass(ctx, d, ledger.AttemptFilter{Batch: *batch, Key: *key})
	if err != nil {
		return failCmd(e, "ledger", err)
	}
	partials, err := ledger.ListPartials(ctx, d.pool, ledger.AttemptFilter{Batch: *batch, Key: *key, Limit: partialsShown})
	if err != nil {
		return failCmd(e, "ledger", err)
	}
	byModel, err := ledger.UsageByModel(ctx, d.pool, ledger.AttemptFilter{Batch: *batch, Key: *key})
	if err != nil {
		return failCmd(e, "ledger", err)
	}
	byMode, saved, err := ledger.UsageByMode(ctx, d.pool, ledger.AttemptFilter{Batch: *batch, Key: *key})
	if err != nil {
		return failCmd(e, "ledger", err)
	}
	amb, doubled, err := ambiguityOf(ctx, d, cfg, ledger.AttemptFilter{Batch: *batch, Key: *key})
	if err != nil {
		return failCmd(e, "ledger", err)
	}
	if *asJSON {
		r := ledgerReport{ClassUsage: total, ByClass: byClass, Partials: partials, ByModel: byModel, ByMode: byMode, BatchSavedUSD: saved,
			PossiblyDoubleBilled: doubled, Ambiguity: amb}
		if r.Partials == nil {
			r.Partials = []ledger.PartialAttempt{}
		}
		if *batch != "" {
			r.Batch = batch
		}
		if *key != "" {
			r.Key = key
		}
		if r.ByClass == nil {
			r.ByClass = []ledger.ClassUsage{}
		}
		return writeOrFail(e, "ledger", writeJSONLine(e.stdout, r))
	}
	if total.Calls == 0 {
		fmt.Fprintln(e.stderr, "no calls recorded yet")
		return exitOK
	}
	writeUsageTable(e.stdout, total, byClass, true)
	if total.BatchReservedUSD > 0 {
		fmt.Fprintf(e.stdout, "in provider batches: %s (estimate of the batch-mode lines waiting for their answer, at batch prices; not in possibly_billed_usd)\n", usd(total.BatchReservedUSD))
	}
	if len(byModel) > 1 {
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\nmodel\tkey\tcalls\tanswered\tspend_usd\t")
		for _, u := range byModel {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.6f\t\n", safe(u.Model), safe(u.Key), u.Calls, u.Answered, u.SpendUSD)
		}
		tw.Flush()
	}
	if len(byMode) > 0 {
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\nmode\tcalls\tspend_usd\tsync_cost_usd\t")
		for _, m := range byMode {
			syncCost := "-"
			if m.SyncCostUSD != nil {
				syncCost = fmt.Sprintf("%.6f", *m.SyncCostUSD)
			}
			fmt.Fprintf(tw, "%s\t%d\t%.6f\t%s\t\n", m.Mode, m.Calls, m.SpendUSD, syncCost)
		}
		tw.Flush()
		fmt.Fprintf(e.stdout, "batch mode saved %s against the same calls sync\n", usd(*saved))
	}
	writeUsageNotes(e.stdout, byClass)
	writePartials(e.stdout, partials)
	for _, a := range amb {
		if a.Unanswered == 0 {
			continue
		}
		policy := a.Policy
		if policy == "" {
			policy = "unknown"
		}
		fmt.Fprintf(e.stdout, "key %s (ambiguous = %s): %d lost answers: %d found by look-up (billed once), %d resent, %d dead-lettered, %d still unknown; %d records possibly billed twice\n",
			safe(a.Key), policy, a.Unanswered, a.FoundByLookup, a.Resent, a.DeadLettered, a.Unknown, a.PossiblyDoubleBilled)
	}
	return exitOK
}

// writeUsageNotes says what the rows that are not classifier classes are.
func writeUsageNotes(w io.Writer, byClass []ledger.ClassUsage) {
	for _, u := range byClass {
		switch u.Class {
		case ledger.ClassUnreadableOK:
			fmt.Fprintln(w, "ok_unreadable: a 2xx whose body was not usable (dead-lettered invalid_output); the provider may have billed it, so its estimate is possibly billed")
		case ledger.ClassResolved:
			fmt.Fprintln(w, "resolved: a call whose outcome was lost (its process stopped mid-call), settled by a later send with the same idempotency key: billed once, on that send's row")
		case classInFlight:
			fmt.Fprintln(w, "in_flight: sent, no outcome recorded: a call still running, or one cut when its process stopped (counted as possibly billed)")
		}
	}
}

// writeUsageTable prints the per-class sums and their total.
func writeUsageTable(w io.Writer, total ledger.ClassUsage, byClass []ledger.ClassUsage, tokens bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if tokens {
		fmt.Fprintln(tw, "class\tcalls\trecords\tretries\tinput_tokens\toutput_tokens\tspend_usd\tpossibly_billed_usd\t")
	} else {
		fmt.Fprintln(tw, "class\tcalls\trecords\tretries\tspend_usd\tpossibly_billed_usd\t")
	}
	row := func(name string, u ledger.ClassUsage) {
		if tokens {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.6f\t%.6f\t\n", name, u.Calls, u.Records, u.Retries,
				u.InputTokens, u.OutputTokens, u.SpendUSD, u.PossiblyBilledUSD)
		} else {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.6f\t%.6f\t\n", name, u.Calls, u.Records, u.Retries, u.SpendUSD, u.PossiblyBilledUSD)
		}
	}
	for _, u := range byClass {
		row(u.Class, u)
	}
	row("total", total)
	tw.Flush()
}

// ledgerCalls is `triage ledger --calls`: the attempt rows themselves,
// newest first; --json prints them as an array of the ledger's attempt
// shape (with "change" where the request was changed before it was sent).
func ledgerCalls(ctx context.Context, e *env, d *db, f ledger.AttemptFilter, asJSON bool) int {
	rows, err := ledger.ListAttempts(ctx, d.pool, f)
	if err != nil {
		return failCmd(e, "ledger", err)
	}
	if asJSON {
		if rows == nil {
			rows = []ledger.Attempt{}
		}
		return writeOrFail(e, "ledger", writeJSONLine(e.stdout, rows))
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.stderr, "no calls recorded yet")
		return exitOK
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBATCH\tRECORD\tATTEMPT\tSTATUS\tLOST ANSWER\tCLASS\tREASON\tCHANGE\tCOST USD\tMODE")
	for _, a := range rows {
		change, resolution := orDash(a.Change), orDash(string(a.Resolution))
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.6f\t%s\n", a.ID, safe(a.Batch), safe(a.RecordID), a.Attempt, a.Status,
			resolution, derefOrDash(a.Class), safe(derefOrDash(a.Reason)), change, a.CostUSD, a.Mode)
	}
	tw.Flush()
	if len(rows) == ledger.AttemptLimitDefault {
		fmt.Fprintf(e.stderr, "showing the newest %d calls; narrow with --batch, --record or --key\n", len(rows))
	}
	return exitOK
}
