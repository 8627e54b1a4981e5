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
)

func init() {
	register(command{
		name:    "enqueue",
		summary: "queue a JSONL file as one batch (--pipeline P [--batch B] FILE|-)",
		run:     runEnqueue,
	})
}

// batchIDLayout is the UTC timestamp of a default batch id: the pipeline's
// name, "-", then this (enrich-20261130T020000Z).
const batchIDLayout = "20060102T150405Z"

func defaultBatchID(pipeline string, now time.Time) string {
	return pipeline + "-" + now.UTC().Format(batchIDLayout)
}

// parseInterleaved parses fs over args letting flags and positional arguments
// come in any order (`triage enqueue FILE --pipeline P` as well as
// `triage enqueue --pipeline P FILE`); everything after "--" is positional.
// It returns the positional arguments in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// parseFailed maps a flag parse error to its exit code: -h is not a failure.
func parseFailed(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
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
	if errors.Is(err, ledger.ErrBatchExists) {
		return usageError{fmt.Errorf("batch %q already exists: choose another id with --batch", p.Batch)}
	}
	return err
}

func runEnqueue(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage enqueue", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	pipeline := fs.String("pipeline", "", "pipeline of triage.toml that processes the records (required)")
	batch := fs.String("batch", "", "batch id (default: PIPELINE-YYYYMMDDTHHMMSSZ, UTC)")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: triage enqueue --pipeline P [--batch B] FILE|-")
		fmt.Fprintln(e.stderr, "Queues every record of the JSONL file (one object a line; id from \"id\", else the line")
		fmt.Fprintln(e.stderr, "number) in one transaction: a bad line is reported and nothing is queued.")
		fmt.Fprintln(e.stderr, "Prints the batch id on stdout.")
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if err := checkOneFile(pos, *pipeline); err != nil {
		fmt.Fprintf(e.stderr, "triage enqueue: %v\n", err)
		return exitUsage
	}
	id, n, err := enqueueFile(ctx, e, *pipeline, *batch, pos[0])
	if err != nil {
		fmt.Fprintf(e.stderr, "triage enqueue: %v\n", err)
		return exitFor(err)
	}
	fmt.Fprintln(e.stdout, id)
	fmt.Fprintf(e.stderr, "enqueued %d records as batch %s\n", n, id)
	return exitOK
}

// checkOneFile checks the arguments common to enqueue and run.
func checkOneFile(pos []string, pipeline string) error {
	switch {
	case pipeline == "":
		return errors.New("--pipeline is required")
	case len(pos) == 0:
		return errors.New("name the JSONL file to read (or - for stdin)")
	case len(pos) > 1:
		return fmt.Errorf("unexpected argument %q (one file at a time)", pos[1])
	}
	return nil
}

// enqueueFile loads the configuration, reads file and queues it; it returns
// the batch id and the number of records.
func enqueueFile(ctx context.Context, e *env, pipeline, batch, file string) (string, int, error) {
	cfg, err := loadConfig(e)
	if err != nil {
		return "", 0, err
	}
	if _, err := cfg.Pipeline(pipeline); err != nil {
		return "", 0, usageError{err}
	}
	recs, err := readInput(e, file)
	if err != nil {
		return "", 0, err
	}
	if batch == "" {
		batch = defaultBatchID(pipeline, time.Now())
	}
	d, err := openDB(ctx, e, cfg)
	if err != nil {
		return "", 0, err
	}
	defer d.Close()
	if err := enqueueBatch(ctx, d, cfg, worker.EnqueueParams{Pipeline: pipeline, Batch: batch, Records: recs}); err != nil {
		return "", 0, err
	}
	return batch, len(recs), nil
}
