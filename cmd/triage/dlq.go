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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
)

func init() {
	register(command{
		name:    "dlq",
		summary: "inspect and requeue dead letters (list, show, requeue)",
		run:     runDLQ,
	})
}

const dlqUsage = `usage: triage dlq list [--batch B] [--class C] [--reason R] [--unknown] [--json]
       triage dlq show ID [--json]
       triage dlq requeue ID... | --batch B [--class C] [--reason R]`

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
	case "requeue":
		return runDLQRequeue(ctx, e, rest)
	case "-h", "--help", "help":
		fmt.Fprintln(e.stdout, dlqUsage)
		return exitOK
	default:
		fmt.Fprintf(e.stderr, "triage dlq: unknown subcommand %q (want list, show or requeue)\n%s\n", sub, dlqUsage)
		return exitUsage
	}
}

// dlqClassFlag checks --class against the classifier's closed set.
func dlqClassFlag(class string) error {
	if class == "" {
		return nil
	}
	if _, err := classify.ParseClass(class); err != nil {
		return usageError{fmt.Errorf("--class: %w", err)}
	}
	return nil
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
	if code, ok := parseNoArgs(e, cmd, fs, args); !ok {
		return code
	}
	if err := dlqClassFlag(*class); err != nil {
		return failCmd(e, cmd, err)
	}
	_, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer d.Close()
	if *batch != "" {
		if _, err := ledger.GetBatch(ctx, d.pool, *batch); errors.Is(err, ledger.ErrNotFound) {
			return failCmd(e, cmd, usageError{fmt.Errorf("no batch %q (see `triage status`)", *batch)})
		} else if err != nil {
			return failCmd(e, cmd, err)
		}
	}
	dls, err := ledger.ListDeadLetters(ctx, d.pool, ledger.DeadLetterFilter{Batch: *batch, Class: *class, Reason: *reason, Unknown: *unknown})
	if err != nil {
		return failCmd(e, cmd, err)
	}
	if *asJSON {
		items := make([]ledger.DeadLetterListItem, len(dls)) // [] when empty, never null
		for i, dl := range dls {
			items[i] = dl.ListItem()
		}
		if err := writeJSONIndented(e.stdout, items); err != nil {
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

// dlqGroup is one class/reason line of the summary.
type dlqGroup struct {
	class, reason string
	n             int
	codes         []string // distinct "status code" pairs, in order of first sight
}

func groupDeadLetters(dls []ledger.DeadLetter) []*dlqGroup {
	var out []*dlqGroup
	idx := map[[2]string]*dlqGroup{}
	for _, dl := range dls {
		k := [2]string{dl.Class, dl.Reason}
		g := idx[k]
		if g == nil {
			g = &dlqGroup{class: dl.Class, reason: dl.Reason}
			idx[k] = g
			out = append(out, g)
		}
		g.n++
		if c := dlqStatusCode(dl); c != "" && !slices.Contains(g.codes, c) {
			g.codes = append(g.codes, c)
		}
	}
	slices.SortStableFunc(out, func(a, b *dlqGroup) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.class+"/"+a.reason, b.class+"/"+b.reason)
	})
	return out
}

// dlqStatusCode is "400 invalid_request_error", "503", "context_length_exceeded" or "".
func dlqStatusCode(dl ledger.DeadLetter) string {
	var parts []string
	if dl.HTTPStatus != 0 {
		parts = append(parts, strconv.Itoa(dl.HTTPStatus))
	}
	if dl.VendorCode != "" {
		parts = append(parts, dl.VendorCode)
	}
	return strings.Join(parts, " ")
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
	fmt.Fprintf(w, "%d %s\n", len(dls), noun)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, g := range groupDeadLetters(dls) {
		codes := ""
		if len(g.codes) > 0 {
			codes = "\t(" + strings.Join(g.codes, ", ") + ")"
		}
		fmt.Fprintf(tw, "  %s / %s:\t%d%s\n", g.class, g.reason, g.n, codes)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBATCH\tRECORD\tCLASS\tREASON\tSTATUS\tCODE\tATTEMPTS\tCREATED")
	for _, dl := range dls {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", dl.ID, dl.Batch, dl.RecordID, dl.Class, dl.Reason,
			dlqOrDash(dl.HTTPStatus, strconv.Itoa(dl.HTTPStatus)), dlqOrDash(len(dl.VendorCode), dl.VendorCode), dl.Attempts,
			dl.CreatedAt.Local().Format(time.DateTime))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nshow one with `triage dlq show ID`; after fixing the pipeline, `triage dlq requeue --batch B [--class C] [--reason R]`")
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
	dl, err := ledger.GetDeadLetter(ctx, d.pool, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return failCmd(e, cmd, usageError{fmt.Errorf("no dead letter with id %d (see `triage dlq list`)", id)})
	}
	if err != nil {
		return failCmd(e, cmd, err)
	}
	var record json.RawMessage
	recs, err := ledger.Records(ctx, d.pool, dl.Batch, []string{dl.RecordID})
	if err != nil {
		return failCmd(e, cmd, err)
	}
	if len(recs) == 1 {
		record = recs[0].Data
	}
	if *asJSON {
		b, err := dlqShowJSON(dl, record)
		if err == nil {
			err = writeJSONIndented(e.stdout, b)
		}
		if err != nil {
			return failCmd(e, cmd, err)
		}
		return exitOK
	}
	writeDLQShow(e.stdout, dl, record)
	return exitOK
}

func parseDeadLetterID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usageError{fmt.Errorf("%q is not a dead letter ID (a positive number; see `triage dlq list`)", s)}
	}
	return id, nil
}

// dlqShowJSON is the ledger's detail shape (the list fields, then job_id,
// pipeline, key, request, error_excerpt, requeued_at) plus "record": the
// input record as enqueued, null if it is gone.
func dlqShowJSON(dl ledger.DeadLetter, record json.RawMessage) (json.RawMessage, error) {
	b, err := json.Marshal(dl)
	if err != nil {
		return nil, err
	}
	if len(record) == 0 {
		record = json.RawMessage("null")
	}
	rec, err := json.Marshal(record)
	if err != nil {
		return nil, err
	}
	// b is an object: splice "record" in before its closing brace.
	b = bytes.TrimRight(b, " \n")
	out := append(b[:len(b)-1:len(b)-1], `,"record":`...)
	out = append(out, rec...)
	return append(out, '}'), nil
}

func writeDLQShow(w io.Writer, dl ledger.DeadLetter, record json.RawMessage) {
	fmt.Fprintf(w, "dead letter %d\n", dl.ID)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
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
			fmt.Fprintf(w, "  %s\n", buf.String())
			return
		}
		for line := range strings.Lines(string(body)) {
			fmt.Fprintf(w, "  %s", strings.TrimRight(line, "\n")+"\n")
		}
	}
	section("record", record)
	section("request", dl.Request)
	section("error (redacted excerpt)", []byte(dl.ErrorExcerpt))
	if dl.RequeuedAt == nil {
		fmt.Fprintf(w, "\nafter fixing the pipeline: triage dlq requeue %d\n", dl.ID)
	}
}

// --- dlq requeue ------------------------------------------------------------

// requeueOptions say which dead letters go back to the queue: IDs, or a
// batch with optional class and reason filters.
type requeueOptions struct {
	IDs    []int64
	Batch  string
	Class  string
	Reason string
}

func (o requeueOptions) validate() error {
	switch {
	case len(o.IDs) > 0 && (o.Batch != "" || o.Class != "" || o.Reason != ""):
		return usageError{errors.New("give dead letter IDs or --batch (with --class/--reason), not both")}
	case len(o.IDs) == 0 && o.Batch == "" && (o.Class != "" || o.Reason != ""):
		return usageError{errors.New("--class and --reason select within a batch: add --batch B")}
	case len(o.IDs) == 0 && o.Batch == "":
		return usageError{errors.New("give dead letter IDs or --batch B")}
	}
	return dlqClassFlag(o.Class)
}

// requeueResult is what one requeue did.
type requeueResult struct {
	// Requeued is the number of records sent back to the queue.
	Requeued int
	// Skipped: selected dead letters requeued before (or by a concurrent run).
	Skipped int
	// Batches touched, in order.
	Batches []string
	// Unchanged counts rejected records whose request renders as before.
	Unchanged int
}

func runDLQRequeue(ctx context.Context, e *env, args []string) int {
	const cmd = "dlq requeue"
	fs := flag.NewFlagSet("triage "+cmd, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var o requeueOptions
	fs.StringVar(&o.Batch, "batch", "", "requeue this batch's dead letters")
	fs.StringVar(&o.Class, "class", "", "with --batch: only this class")
	fs.StringVar(&o.Reason, "reason", "", "with --batch: only this reason")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: triage dlq requeue ID... | --batch B [--class C] [--reason R]")
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	for _, p := range pos {
		id, err := parseDeadLetterID(p)
		if err != nil {
			return failCmd(e, cmd, err)
		}
		if !slices.Contains(o.IDs, id) {
			o.IDs = append(o.IDs, id)
		}
	}
	if err := o.validate(); err != nil {
		return failCmd(e, cmd, err)
	}
	// The jobs are built from the configuration as it is now.
	cfg, err := loadConfig(e)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	d, err := openDB(ctx, e, cfg)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer d.Close()
	res, err := requeueDeadLetters(ctx, d.pool, cfg, o)
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

// requeueDeadLetters marks the selected dead letters requeued and inserts one new River
// job per record, in one transaction: a record is requeued once however often
// (or however concurrently) this runs. Each job is built from cfg as it is
// now: the pipeline's current key decides the queue, its max_attempts the
// attempts; the worker renders the request from the current pipeline.
func requeueDeadLetters(ctx context.Context, pool *pgxpool.Pool, cfg *config.Config, o requeueOptions) (requeueResult, error) {
	var res requeueResult
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		return res, fmt.Errorf("river client: %w", err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		res = requeueResult{}
		selected, err := selectDeadLetters(ctx, tx, o)
		if err != nil {
			return err
		}
		// Every pipeline must still exist before anything is marked.
		type target struct {
			pipeline *config.Pipeline
			opts     *river.InsertOpts
		}
		targets := map[string]target{}
		for _, dl := range selected {
			if _, ok := targets[dl.Pipeline]; ok {
				continue
			}
			pl, err := cfg.Pipeline(dl.Pipeline)
			if err != nil {
				return usageError{fmt.Errorf("dead letter %d: %w; nothing requeued", dl.ID, err)}
			}
			key, _, err := cfg.KeyFor(pl.Name)
			if err != nil {
				return usageError{fmt.Errorf("dead letter %d: %w; nothing requeued", dl.ID, err)}
			}
			targets[pl.Name] = target{pl, &river.InsertOpts{Queue: keys.QueueName(key.Name), MaxAttempts: worker.RiverMaxAttempts(pl)}}
		}

		ids := make([]int64, len(selected))
		for i, dl := range selected {
			ids[i] = dl.ID
		}
		marked, err := ledger.MarkRequeued(ctx, tx, ids)
		if err != nil {
			return err
		}
		res.Skipped = len(selected) - len(marked)
		if len(marked) == 0 {
			return nil
		}

		// The records, per batch, from the ledger.
		byBatch := map[string][]string{}
		var toInsert []ledger.DeadLetter
		for _, dl := range selected {
			if _, ok := slices.BinarySearch(marked, dl.ID); !ok {
				continue
			}
			if _, seen := byBatch[dl.Batch]; !seen {
				res.Batches = append(res.Batches, dl.Batch)
			}
			byBatch[dl.Batch] = append(byBatch[dl.Batch], dl.RecordID)
			toInsert = append(toInsert, dl)
		}
		records := map[[2]string]json.RawMessage{}
		for _, b := range res.Batches {
			recs, err := ledger.Records(ctx, tx, b, byBatch[b])
			if err != nil {
				return err
			}
			for _, r := range recs {
				records[[2]string{b, r.ID}] = r.Data
			}
		}
		params := make([]river.InsertManyParams, 0, len(toInsert))
		for _, dl := range toInsert {
			data, ok := records[[2]string{dl.Batch, dl.RecordID}]
			if !ok {
				return fmt.Errorf("dead letter %d: record %s/%s is not in the ledger", dl.ID, dl.Batch, dl.RecordID)
			}
			t := targets[dl.Pipeline]
			if dl.Class == "rejected" && requeueSameRequest(t.pipeline, cfg, dl, data) {
				res.Unchanged++
			}
			params = append(params, river.InsertManyParams{
				Args:       worker.Args{Batch: dl.Batch, Pipeline: dl.Pipeline, RecordID: dl.RecordID, Record: data},
				InsertOpts: t.opts,
			})
		}
		n, err := rc.InsertManyFastTx(ctx, tx, params)
		if err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
		res.Requeued = n
		return nil
	})
	if err != nil {
		return requeueResult{}, err
	}
	return res, nil
}

// selectDeadLetters reads the dead letters o names, in id order. Unknown IDs
// and an unknown batch are the caller's mistake (usageError); IDs requeued
// before are included (MarkRequeued skips them).
func selectDeadLetters(ctx context.Context, tx pgx.Tx, o requeueOptions) ([]ledger.DeadLetter, error) {
	if len(o.IDs) > 0 {
		var out []ledger.DeadLetter
		var missing []string
		for _, id := range o.IDs {
			dl, err := ledger.GetDeadLetter(ctx, tx, id)
			if errors.Is(err, ledger.ErrNotFound) {
				missing = append(missing, strconv.FormatInt(id, 10))
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, dl)
		}
		if len(missing) > 0 {
			return nil, usageError{fmt.Errorf("no dead letter with id %s (see `triage dlq list`); nothing requeued", strings.Join(missing, ", "))}
		}
		slices.SortFunc(out, func(a, b ledger.DeadLetter) int { return int(a.ID - b.ID) })
		return out, nil
	}
	if _, err := ledger.GetBatch(ctx, tx, o.Batch); errors.Is(err, ledger.ErrNotFound) {
		return nil, usageError{fmt.Errorf("no batch %q (see `triage status`)", o.Batch)}
	} else if err != nil {
		return nil, err
	}
	return ledger.ListDeadLetters(ctx, tx, ledger.DeadLetterFilter{Batch: o.Batch, Class: o.Class, Reason: o.Reason})
}

// requeueSameRequest reports whether the current pipeline renders, for this record,
// the model, system prompt and prompt the rejected request carried. Only a
// hint for a warning: any doubt is "changed".
func requeueSameRequest(pl *config.Pipeline, cfg *config.Config, dl ledger.DeadLetter, data json.RawMessage) bool {
	var old struct {
		Model  string `json:"model"`
		System string `json:"system"`
		Prompt string `json:"prompt"`
	}
	if len(dl.Request) == 0 || json.Unmarshal(dl.Request, &old) != nil || old.Model == "" {
		return false
	}
	var rec map[string]any
	if json.Unmarshal(data, &rec) != nil {
		return false
	}
	prompt, err := pl.Render(rec)
	if err != nil {
		return false
	}
	m, err := cfg.Model(pl.Model)
	if err != nil {
		return false
	}
	return old.Model == m.Name && old.System == pl.System && old.Prompt == prompt
}
