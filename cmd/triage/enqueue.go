package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/operator"
)

func init() {
	register(command{
		name:    "enqueue",
		summary: "queue a JSONL file as one batch (--pipeline P [--batch B] [--deadline D] FILE|-)",
		run:     runEnqueue,
	})
}

// batchIDLayout is the UTC timestamp of a default batch id: the pipeline's
// name, "-", then this (enrich-20261130T020000Z).
const batchIDLayout = "20060102T150405Z"

func defaultBatchID(pipeline string, now time.Time) string {
	return pipeline + "-" + now.UTC().Format(batchIDLayout)
}

// openInput opens FILE, or stdin for "-", and names it for errors. A
// missing file is the caller's input (exit 2).
func openInput(e *env, file string) (io.Reader, string, func(), error) {
	if file == "-" {
		return e.stdin, "stdin", func() {}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, "", nil, usageError{err}
	}
	return f, file, func() { f.Close() }, nil
}

// enqueueBatch streams the records of r into batch p.Batch, mapping the
// caller's mistakes (unknown pipeline, batch id in use, a bad line, no
// records) to usage errors. It returns the number of records queued.
func enqueueBatch(ctx context.Context, d *db, cfg *config.Config, p enqueue.Params, r io.Reader) (int, error) {
	n, err := enqueue.JSONL(ctx, d.pool, "", cfg, p, r)
	var lineErr *enqueue.LineError
	switch {
	case errors.Is(err, ledger.ErrBatchExists):
		return 0, usageError{fmt.Errorf("batch %q already exists: choose another id with --batch", p.Batch)}
	case errors.As(err, &lineErr), errors.Is(err, enqueue.ErrBadName), errors.Is(err, enqueue.ErrNoRecords):
		return 0, usageError{err}
	}
	return n, err
}

// progressEvery is how often a long enqueue says how far it has read.
const progressEvery = 2 * time.Second

// enqueueProgress returns a Progress callback that writes "enqueue: N
// records read (M MB)" to w at most once every progressEvery, and not at
// all for an input read in less.
func enqueueProgress(w io.Writer, now func() time.Time) func(int, int64) {
	last := now()
	return func(n int, b int64) {
		if t := now(); t.Sub(last) >= progressEvery {
			last = t
			fmt.Fprintf(w, "enqueue: %d records read (%.1f MB), not yet committed\n", n, float64(b)/1e6)
		}
	}
}

func runEnqueue(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage enqueue", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var f batchFlags
	f.define(fs)
	setUsage(fs, e,
		"usage: triage enqueue --pipeline P [--batch B] [--deadline D] [--no-cache] [--dry-run] FILE|-",
		"Queues every record of the JSONL file (one object a line; id from \"id\", else the line",
		"number) in one transaction: a bad line is reported and nothing is queued.",
		"Prints the batch id on stdout.",
	)
	if code, ok := f.parse(e, "enqueue", fs, args); !ok {
		return code
	}
	if f.dryRun {
		return runDryRun(ctx, e, "enqueue", f, nil)
	}
	_, d, id, n, err := enqueueFile(ctx, e, f, nil)
	if err != nil {
		return failCmd(e, "enqueue", err)
	}
	defer d.Close()
	fmt.Fprintln(e.stdout, id)
	fmt.Fprintf(e.stderr, "enqueued %d records as batch %s%s\n", n, id, deadlineNote(ctx, d, id))
	return exitOK
}

// deadlineNote is ", deadline 2026-12-02 06:00 CET (in 7h45m)" for a batch
// with a deadline, so whoever typed "06:00" sees which 06:00 it became; ""
// for none, or when it cannot be read (the batch is queued either way).
func deadlineNote(ctx context.Context, d *db, id string) string {
	b, err := ledger.GetBatch(ctx, d.pool, id)
	if err != nil || b.Deadline == nil {
		return ""
	}
	return ", deadline " + operator.DescribeDeadline(*b.Deadline, time.Now())
}

// batchFlags are the flags and the argument enqueue and run share.
type batchFlags struct {
	pipeline, batch string
	file            string // after parse: the JSONL file, "-" for stdin
	noCache         bool
	dryRun          bool
	deadline        deadlineFlag
}

// deadlineFlag is --deadline: a clock time or a duration (config.Deadline);
// unset is the zero Deadline (the pipeline's).
type deadlineFlag struct {
	d   config.Deadline
	raw string
}

func (f *deadlineFlag) String() string { return f.raw }

func (f *deadlineFlag) Set(s string) error {
	d, err := config.ParseDeadline(s)
	if err != nil {
		return err
	}
	if d.IsZero() {
		return errors.New(`want a clock time like "06:00" or a duration like "8h"`)
	}
	f.d, f.raw = d, s
	return nil
}

// define adds --pipeline and --batch to fs.
func (f *batchFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.pipeline, "pipeline", "", "pipeline of triage.toml that processes the records (required)")
	fs.StringVar(&f.batch, "batch", "", "batch id (default: PIPELINE-YYYYMMDDTHHMMSSZ, UTC)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "write nothing and send nothing: read and check the file, then print its records, estimated tokens and cost at sync and batch prices, and the time at the key's known pace")
	fs.BoolVar(&f.noCache, "no-cache", false, "call the provider for every record even when the pipeline's response cache (cache = true) holds an answer")
	fs.Var(&f.deadline, "deadline", `when the whole batch must be done: a clock time, "06:00" (the next 06:00 local time), or a duration from now, "8h" (default: the pipeline's deadline, if any). Stored with the batch; mode = "auto" pipelines use it to choose between the provider's Batch API and sync calls`)
}

// parse parses args with fs and checks for --pipeline and exactly one file.
// When the command must stop it has said why on stderr and returns the exit
// code with ok false.
func (f *batchFlags) parse(e *env, cmd string, fs *flag.FlagSet, args []string) (code int, ok bool) {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err), false
	}
	switch {
	case f.pipeline == "":
		err = errors.New("--pipeline is required")
	case len(pos) == 0:
		err = errors.New("name the JSONL file to read (or - for stdin)")
	case len(pos) > 1:
		err = fmt.Errorf("unexpected argument %q (one file at a time)", pos[1])
	}
	if err != nil {
		return failCmd(e, cmd, usageError{err}), false
	}
	f.file = pos[0]
	return exitOK, true
}

// enqueueFile loads the configuration, reads the file and queues it as one
// batch (budget: nil for the pipeline's budget_usd). It returns the
// configuration, the database, still open for the caller to close, the batch
// id and the number of records.
func enqueueFile(ctx context.Context, e *env, f batchFlags, budget *float64) (*config.Config, *db, string, int, error) {
	cfg, err := loadConfig(e)
	if err != nil {
		return nil, nil, "", 0, err
	}
	// Everything a call needs, before anything is written: the pipeline,
	// its model and key, the key's variable, a client for its vendor.
	if err := worker.CheckCallable(cfg, f.pipeline, e.getenv); err != nil {
		return nil, nil, "", 0, usageError{err}
	}
	id := f.batch
	if id == "" {
		id = defaultBatchID(f.pipeline, time.Now())
	}
	if err := enqueue.CheckBatchID(id); err != nil {
		return nil, nil, "", 0, usageError{fmt.Errorf("--batch: %w", err)}
	}
	r, name, closeInput, err := openInput(e, f.file)
	if err != nil {
		return nil, nil, "", 0, err
	}
	defer closeInput()
	d, err := openDB(ctx, e, cfg)
	if err != nil {
		return nil, nil, "", 0, err
	}
	n, err := enqueueBatch(ctx, d, cfg, enqueue.Params{Pipeline: f.pipeline, Batch: id, BudgetUSD: budget, File: name, NoCache: f.noCache,
		Deadline: f.deadline.d, Progress: enqueueProgress(e.stderr, time.Now)}, r)
	if err != nil {
		d.Close()
		return nil, nil, "", 0, err
	}
	return cfg, d, id, n, nil
}
