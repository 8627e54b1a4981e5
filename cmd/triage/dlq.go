package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/redact"
	"github.com/triage-dev/triage/worker/operator"
)

func init() {
	register(command{
		name:    "dlq",
		summary: "inspect, export and requeue dead letters (list, show, export, requeue)",
		run:     runDLQ,
	})
}

const dlqUsage = `usage: triage dlq list [--batch B] [--class C] [--reason R] [--unknown] [--suspect] [--json]
       triage dlq show ID [--json]
       triage dlq export [--batch B] [--class C] [--reason R] [--unknown]
       triage dlq requeue ID... | --batch B [--class C] [--reason R] | --suspect [--batch B]`

func runDLQ(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, dlqUsage)
		return exitUsage
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "list":
		return runDLQList(ctx, e, rest)
	case "show":
		return runDLQShow(ctx, e, rest)
	case "export":
		return runDLQExport(ctx, e, rest)
	case "requeue":
		return runDLQRequeue(ctx, e, rest)
	case "-h", "--help", "help":
		fmt.Fprintln(e.stdout, dlqUsage)
		return exitOK
	default:
		fmt.Fprintf(e.stderr, "triage dlq: unknown subcommand %q (want list, show, export or requeue)\n%s\n", sub, dlqUsage)
		return exitUsage
	}
}

// --- dlq list ---------------------------------------------------------------

func runDLQList(ctx context.Context, e *env, args []string) int {
	const cmd = "dlq list"
	fs := flag.NewFlagSet("triage "+cmd, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	batch := fs.String("batch", "", "only this batch")
	class := fs.String("class", "", "only this class (transient, throttled, exhausted, rejected, ambiguous, ok)")
	reason := fs.String("reason", "", "only this reason (e.g. context_length, retries_exhausted)")
	asJSON := fs.Bool("json", false, "print a JSON array")
	unknown := fs.Bool("unknown", false, "only dead letters whose verdict was a default (known:false): the errors no rule knew")
	suspect := fs.Bool("suspect", false, "only suspect dead letters: the class came from the safety net, the signal layer, the status alone or a default")
	if code, ok := parseNoArgs(e, cmd, fs, args); !ok {
		return code
	}
	_, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer d.Close()
	dls, err := operator.ListDeadLetters(ctx, d.pool, operator.DeadLetterFilter{Batch: *batch, Class: *class, Reason: *reason, Unknown: *unknown, Suspect: *suspect})
	if err != nil {
		return failCmd(e, cmd, err)
	}
	if *asJSON {
		if err := writeJSONIndented(e.stdout, operator.ListItems(dls)); err != nil {
			return failCmd(e, cmd, err)
		}
		return exitOK
	}
	writeDLQList(e.stdout, dls)
	return exitOK
}

func writeJSONIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeDLQList(w io.Writer, dls []ledger.DeadLetter) {
	if len(dls) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return
	}
	noun := "dead letters"
	if len(dls) == 1 {
		noun = "dead letter"
	}
	suspects := 0
	for _, dl := range dls {
		if dl.Suspect != "" {
			suspects++
		}
	}
	if suspects > 0 {
		fmt.Fprintf(w, "%d %s, %d suspect (the record may be fine: see SUSPECT)\n", len(dls), noun, suspects)
	} else {
		fmt.Fprintf(w, "%d %s\n", len(dls), noun)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, g := range operator.GroupDeadLetters(dls) {
		codes := ""
		if len(g.Codes) > 0 {
			codes = "\t(" + cell(strings.Join(g.Codes, ", ")) + ")"
		}
		fmt.Fprintf(tw, "  %s / %s:\t%d%s\n", cell(g.Class), cell(g.Reason), g.Count, codes)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBATCH\tRECORD\tCLASS\tREASON\tSTATUS\tCODE\tATTEMPTS\tSUSPECT\tCREATED")
	for _, dl := range dls {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", dl.ID, cell(dl.Batch), cell(dl.RecordID), cell(dl.Class), cell(dl.Reason),
			dlqOrDash(dl.HTTPStatus, strconv.Itoa(dl.HTTPStatus)), dlqOrDash(len(dl.VendorCode), cell(dl.VendorCode)), dl.Attempts,
			dlqOrDash(len(dl.Suspect), cell(dl.Suspect)), dl.CreatedAt.Local().Format(time.DateTime))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nshow one with `triage dlq show ID`; requeue with `triage dlq requeue --batch B [--class C] [--reason R]`:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, g := range operator.GroupDeadLetters(dls) {
		fmt.Fprintf(tw, "  %s / %s:\t%s\n", cell(g.Class), cell(g.Reason), requeueAdvice(g.Class, g.Reason))
	}
	tw.Flush()
	if suspects > 0 {
		fmt.Fprintln(w, "once the key is healthy, `triage dlq requeue --suspect [--batch B]` takes back just the suspect ones")
	}
}

// suspectWhy says in words why a dead letter is suspect.
func suspectWhy(s string) string {
	switch s {
	case ledger.SuspectSignal:
		return "the class came from the signal layer, no vendor rule: the record may be fine"
	case ledger.SuspectStatus:
		return "the class came from the HTTP status alone: the record may be fine"
	case ledger.SuspectUnknown:
		return "no rule knew this error: the record may be fine"
	case ledger.SuspectSafetyNet:
		return "the safety net held the key for this failure: the key, not the record, is likely the problem"
	}
	return "the record may be fine"
}

// dlqOrDash is s, or "-" when n is zero.
func dlqOrDash(n int, s string) string {
	if n == 0 {
		return "-"
	}
	return s
}

// --- dlq show ---------------------------------------------------------------

func runDLQShow(ctx context.Context, e *env, args []string) int {
	const cmd = "dlq show"
	fs := flag.NewFlagSet("triage "+cmd, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		return failCmd(e, cmd, usageError{errors.New("want exactly one dead letter ID (see `triage dlq list`)")})
	}
	id, err := parseDeadLetterID(pos[0])
	if err != nil {
		return failCmd(e, cmd, err)
	}
	_, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer d.Close()
	det, err := operator.GetDeadLetter(ctx, d.pool, id)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	if *asJSON {
		if err := writeJSONIndented(e.stdout, det); err != nil {
			return failCmd(e, cmd, err)
		}
		return exitOK
	}
	writeDLQShow(e.stdout, det)
	writeDLQCalls(e.stdout, det.Calls)
	return exitOK
}

func parseDeadLetterID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usageError{fmt.Errorf("%q is not a dead letter ID (a positive number; see `triage dlq list`)", s)}
	}
	return id, nil
}

func writeDLQShow(w io.Writer, det operator.DeadLetterDetail) {
	dl, record := det.DeadLetter, det.Record
	fmt.Fprintf(w, "dead letter %d\n", dl.ID)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, safe(v)) }
	row("batch:", dl.Batch)
	row("record:", dl.RecordID)
	row("pipeline:", dl.Pipeline)
	row("key:", dlqOrDash(len(dl.Key), dl.Key))
	row("class:", dl.Class)
	row("reason:", dl.Reason)
	row("status:", dlqOrDash(dl.HTTPStatus, strconv.Itoa(dl.HTTPStatus)))
	row("code:", dlqOrDash(len(dl.VendorCode), dl.VendorCode))
	rule := dlqOrDash(len(dl.Rule), dl.Rule)
	if dl.Unknown {
		rule += " (no rule knew this error: add one in [[rules]], check it with `triage classify --explain`)"
	}
	row("rule:", rule)
	if dl.Suspect != "" {
		row("suspect:", dl.Suspect+" ("+suspectWhy(dl.Suspect)+")")
	}
	row("attempts:", strconv.Itoa(dl.Attempts))
	row("job:", dlqOrDash(int(dl.JobID), strconv.FormatInt(dl.JobID, 10)))
	row("created:", dl.CreatedAt.Local().Format(time.DateTime+" MST"))
	if dl.RequeuedAt != nil {
		row("requeued:", dl.RequeuedAt.Local().Format(time.DateTime+" MST"))
	} else {
		row("requeued:", "no")
	}
	tw.Flush()
	section := func(title string, body []byte) {
		fmt.Fprintf(w, "\n%s:\n", title)
		if len(bytes.TrimSpace(body)) == 0 || string(body) == "null" {
			fmt.Fprintln(w, "  (none)")
			return
		}
		var buf bytes.Buffer
		if json.Indent(&buf, body, "  ", "  ") == nil {
			fmt.Fprintf(w, "  %s\n", redact.Escape(buf.String(), true))
			return
		}
		for line := range strings.Lines(string(body)) {
			fmt.Fprintf(w, "  %s", redact.Escape(strings.TrimRight(line, "\n"), true)+"\n")
		}
	}
	section("record", record)
	section("request", dl.Request)
	section("error (redacted excerpt)", []byte(dl.ErrorExcerpt))
	if p := det.Partial; p != nil {
		fmt.Fprintf(w, "\npartial output (cut stream: %d chars, %d output tokens received):\n", p.Chars, p.OutputTokens)
		for line := range strings.Lines(p.Text) {
			fmt.Fprintf(w, "  %s\n", redact.Escape(strings.TrimRight(line, "\n"), true))
		}
	}
	if dl.RequeuedAt == nil {
		fmt.Fprintf(w, "\n%s: triage dlq requeue %d\n", requeueAdvice(dl.Class, dl.Reason), dl.ID)
	}
}

// writeDLQCalls lists the record's calls, oldest first: a request changed
// once before it was sent again (truncated, JSON mode dropped) shows both.
func writeDLQCalls(w io.Writer, calls []ledger.Attempt) {
	if len(calls) == 0 {
		return
	}
	fmt.Fprintln(w, "\ncalls (oldest first):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ATTEMPT\tSTATUS\tLOST ANSWER\tCLASS\tREASON\tHTTP\tCHANGE\tIDEMPOTENCY KEY")
	for _, a := range calls {
		change, resolution := orDash(a.Change), orDash(string(a.Resolution))
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, a.Status, resolution, derefOrDash(a.Class), safe(derefOrDash(a.Reason)),
			intOrDash(a.HTTPStatus), change, a.IdempotencyKey)
	}
	tw.Flush()
}

func derefOrDash(s *string) string {
	if s == nil {
		return "-"
	}
	return orDash(*s)
}

// orDash is s, or "-" for an empty s: a table's empty cell.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func intOrDash(n *int) string {
	if n == nil || *n == 0 {
		return "-"
	}
	return strconv.Itoa(*n)
}

// --- dlq requeue ------------------------------------------------------------

// runDLQRequeue is `triage dlq requeue`: operator.Requeue, the same function
// the dead-letter page's Requeue button calls.
func runDLQRequeue(ctx context.Context, e *env, args []string) int {
	const cmd = "dlq requeue"
	fs := flag.NewFlagSet("triage "+cmd, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var sel operator.Selection
	fs.StringVar(&sel.Batch, "batch", "", "requeue this batch's dead letters")
	fs.StringVar(&sel.Class, "class", "", "with --batch: only this class")
	fs.StringVar(&sel.Reason, "reason", "", "with --batch: only this reason")
	fs.BoolVar(&sel.Suspect, "suspect", false, "only suspect dead letters (the class came from the safety net, the signal layer, the status alone or a default); every batch's unless --batch")
	noCache := fs.Bool("no-cache", false, "call the provider for the requeued records even when the pipeline's response cache (cache = true) holds an answer")
	setUsage(fs, e, "usage: triage dlq requeue ID... | --batch B [--class C] [--reason R] | --suspect [--batch B] [--no-cache]")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	for _, p := range pos {
		id, err := parseDeadLetterID(p)
		if err != nil {
			return failCmd(e, cmd, err)
		}
		if !slices.Contains(sel.IDs, id) {
			sel.IDs = append(sel.IDs, id)
		}
	}
	if err := sel.Validate(); err != nil {
		return failCmd(e, cmd, err)
	}
	// The jobs are built from the configuration as it is now.
	cfg, err := loadConfig(e)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	d, err := openExistingDB(ctx, e, cfg)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer d.Close()
	res, err := operator.Requeue(ctx, d.pool, cfg, sel, operator.RequeueOptions{NoCache: *noCache})
	if err != nil {
		return failCmd(e, cmd, err)
	}
	noun := "records"
	if res.Requeued == 1 {
		noun = "record"
	}
	fmt.Fprintf(e.stdout, "requeued %d %s", res.Requeued, noun)
	if len(res.Batches) > 0 {
		fmt.Fprintf(e.stdout, " (batch %s)", strings.Join(res.Batches, ", "))
	}
	fmt.Fprintln(e.stdout)
	if res.Skipped > 0 {
		fmt.Fprintf(e.stdout, "%d already requeued before, not again\n", res.Skipped)
	}
	if res.Unchanged > 0 {
		fmt.Fprintf(e.stderr, "triage dlq requeue: warning: %d rejected records render the same request as when they were rejected; "+
			"they will likely be rejected again (change the pipeline or its model first)\n", res.Unchanged)
	}
	if res.Requeued > 0 {
		fmt.Fprintln(e.stdout, "running workers pick them up (or start `triage work`); `triage status` shows progress")
	}
	return exitOK
}
