package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
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

// callUsage is what a set of attempts came to. The JSON names are the shape of
// `triage ledger --json`.
type callUsage struct {
	Class             string  `json:"class,omitempty"`
	Calls             int     `json:"calls"`
	Records           int     `json:"records"`
	Retries           int     `json:"retries"`
	InputTokens       int     `json:"input_tokens"`
	OutputTokens      int     `json:"output_tokens"`
	SpendUSD          float64 `json:"spend_usd"`
	PossiblyBilledUSD float64 `json:"possibly_billed_usd"`

	records map[[2]string]struct{}
}

func (u *callUsage) add(a ledger.Attempt) {
	u.Calls++
	if a.IsRetry {
		u.Retries++
	}
	u.InputTokens += a.InputTokens
	u.OutputTokens += a.OutputTokens
	u.SpendUSD += a.CostUSD
	if a.Status == ledger.AttemptPossiblyBilled || a.Status == ledger.AttemptIntent {
		u.PossiblyBilledUSD += a.EstCostUSD
	}
	if u.records == nil {
		u.records = map[[2]string]struct{}{}
	}
	u.records[[2]string{a.Batch, a.RecordID}] = struct{}{}
	u.Records = len(u.records)
}

// rounded drops the float noise of long sums (1e-12 USD is far below any
// price).
func (u callUsage) rounded() callUsage {
	u.SpendUSD = math.Round(u.SpendUSD*1e12) / 1e12
	u.PossiblyBilledUSD = math.Round(u.PossiblyBilledUSD*1e12) / 1e12
	return u
}

// usageByClass sums attempts per classifier class, in the classifier's order
// (ok, transient, throttled, exhausted, rejected, ambiguous), then any other
// label, with the total of all.
func usageByClass(attempts []ledger.Attempt) (total callUsage, byClass []callUsage) {
	index := map[string]*callUsage{}
	for _, a := range attempts {
		class := classInFlight
		if a.Class != nil {
			class = *a.Class
		}
		u := index[class]
		if u == nil {
			u = &callUsage{Class: class}
			index[class] = u
		}
		u.add(a)
		total.add(a)
	}
	order := []string{classify.OK.String(), classify.Transient.String(), classify.Throttled.String(),
		classify.Exhausted.String(), classify.Rejected.String(), classify.Ambiguous.String()}
	for _, c := range order {
		if u := index[c]; u != nil {
			byClass = append(byClass, *u)
			delete(index, c)
		}
	}
	var rest []string
	for c := range index {
		rest = append(rest, c)
	}
	slices.Sort(rest)
	for _, c := range rest {
		byClass = append(byClass, *index[c])
	}
	return total, byClass
}

// allAttempts reads every attempt matching f. ledger.ListAttempts caps its
// rows, so the cap is lifted; the sums are done here.
func allAttempts(ctx context.Context, d *db, f ledger.AttemptFilter) ([]ledger.Attempt, error) {
	f.Limit = math.MaxInt32
	return ledger.ListAttempts(ctx, d.pool, f)
}

// ledgerReport is `triage ledger --json`: the filters (null when not given),
// the totals, and the same sums per class.
type ledgerReport struct {
	Batch *string `json:"batch"`
	Key   *string `json:"key"`
	callUsage
	ByClass []callUsage `json:"by_class"`
}

func runLedger(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage ledger", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	batch := fs.String("batch", "", "only this batch's calls")
	key := fs.String("key", "", "only this key's calls")
	asJSON := fs.Bool("json", false, `print {"batch","key","calls","records","retries","input_tokens","output_tokens","spend_usd","possibly_billed_usd","by_class":[...]}`)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: triage ledger [--batch B] [--key K] [--json]")
		fmt.Fprintln(e.stderr, "What the calls came to, by classifier class: calls, records, retries, tokens, spend and")
		fmt.Fprintln(e.stderr, "possibly billed (sent, no answer: the provider may have billed it).")
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "triage ledger: unexpected argument %q (use --batch B)\n", pos[0])
		return exitUsage
	}
	cfg, err := loadConfigOptional(e)
	if err != nil {
		fmt.Fprintf(e.stderr, "triage ledger: %v\n", err)
		return exitFor(err)
	}
	d, err := openDB(ctx, e, cfg)
	if err != nil {
		fmt.Fprintf(e.stderr, "triage ledger: %v\n", err)
		return exitFor(err)
	}
	defer d.Close()
	if *batch != "" {
		if _, err := ledger.GetBatch(ctx, d.pool, *batch); errors.Is(err, ledger.ErrNotFound) {
			fmt.Fprintf(e.stderr, "triage ledger: no batch %q (`triage status` lists them)\n", *batch)
			return exitUsage
		}
	}
	attempts, err := allAttempts(ctx, d, ledger.AttemptFilter{Batch: *batch, Key: *key})
	if err != nil {
		fmt.Fprintf(e.stderr, "triage ledger: %v\n", err)
		return exitRuntime
	}
	total, byClass := usageByClass(attempts)
	if *asJSON {
		r := ledgerReport{callUsage: total, ByClass: byClass}
		if *batch != "" {
			r.Batch = batch
		}
		if *key != "" {
			r.Key = key
		}
		if r.ByClass == nil {
			r.ByClass = []callUsage{}
		}
		r.callUsage = r.callUsage.rounded()
		for i := range r.ByClass {
			r.ByClass[i] = r.ByClass[i].rounded()
		}
		return writeOrFail(e, "ledger", writeJSONLine(e.stdout, r))
	}
	if total.Calls == 0 {
		fmt.Fprintln(e.stderr, "no calls recorded yet")
		return exitOK
	}
	writeUsageTable(e.stdout, total, byClass, true)
	return exitOK
}

// writeUsageTable prints the per-class sums and their total.
func writeUsageTable(w io.Writer, total callUsage, byClass []callUsage, tokens bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if tokens {
		fmt.Fprintln(tw, "class\tcalls\trecords\tretries\tinput_tokens\toutput_tokens\tspend_usd\tpossibly_billed_usd\t")
	} else {
		fmt.Fprintln(tw, "class\tcalls\trecords\tretries\tspend_usd\tpossibly_billed_usd\t")
	}
	row := func(name string, u callUsage) {
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
