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

// readInput reads the records of FILE, or of stdin for "-". Errors are the
// caller's input (exit 2): a missing file, a bad line (named by file and line).
func readInput(e *env, file string) ([]ledger.Record, error) {
	var (
		r    io.Reader = e.stdin
		name           = "stdin"
	)
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, usageError{err}
		}
		defer f.Close()
		r, name = f, file
	}
	recs, err := worker.ReadJSONL(r, name)
	if err != nil {
		return nil, usageError{err}
	}
	if len(recs) == 0 {
		return nil, usageError{fmt.Errorf("%s holds no records", name)}
	}
	return recs, nil
}

// enqueueBatch queues records as batch p.Batch, mapping the caller's
// mistakes (unknown pipeline, batch id in use) to usage errors.
func enqueueBatch(ctx context.Context, d *db, cfg *config.Config, p worker.EnqueueParams) error {
	err := worker.Enqueue(ctx, d.pool, "", cfg, p)
	var lineErr *worker.LineError
	switch {
	case errors.Is(err, ledger.ErrBatchExists):
		return usageError{fmt.Errorf("batch %q already exists: choose another id with --batch", p.Batch)}
	case errors.As(err, &lineErr), errors.Is(err, worker.ErrBadName):
		return usageError{err}
	}
	return err
}

func runEnqueue(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage enqueue", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var f batchFlags
	f.define(fs)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: triage enqueue --pipeline P [--batch B] [--deadline D] [--no-cache] FILE|-")
		fmt.Fprintln(e.stderr, "Queues every record of the JSONL file (one object a line; id from \"id\", else the line")
		fmt.Fprintln(e.stderr, "number) in one transaction: a bad line is reported and nothing is queued.")
		fmt.Fprintln(e.stderr, "Prints the batch id on stdout.")
		fs.PrintDefaults()
	}
	if code, ok := f.parse(e, "enqueue", fs, args); !ok {
		return code
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
	if err := worker.CheckBatchID(id); err != nil {
		return nil, nil, "", 0, usageError{fmt.Errorf("--batch: %w", err)}
	}
	recs, err := readInput(e, f.file)
	if err != nil {
		return nil, nil, "", 0, err
	}
	d, err := openDB(ctx, e, cfg)
	if err != nil {
		return nil, nil, "", 0, err
	}
	name := f.file
	if name == "-" {
		name = "stdin"
	}
	if err := enqueueBatch(ctx, d, cfg, worker.EnqueueParams{Pipeline: f.pipeline, Batch: id, BudgetUSD: budget, Records: recs, File: name, NoCache: f.noCache,
		Deadline: f.deadline.d}); err != nil {
		d.Close()
		return nil, nil, "", 0, err
	}
	return cfg, d, id, len(recs), nil
}
