package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
)

// LineError is a bad input line: the file and line are named, and nothing is
// enqueued.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// maxLine bounds one JSONL record (a record with a long document in it is
// fine; a file with no newlines at all is not a JSONL file).
const maxLine = 16 << 20

// ReadJSONL reads one JSON object per line. A record's id is its "id" field
// (string or number), else its line number. Blank lines are skipped. The
// first bad line (not an object, duplicate id, an id with a control
// character, a NUL in any string) fails the whole read.
func ReadJSONL(r io.Reader, file string) ([]ledger.Record, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []ledger.Record
	seen := map[string]int{}
	for line := 1; ; line++ {
		b, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, &LineError{File: file, Line: line, Err: err}
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			rec, rerr := parseRecord(t, line)
			if rerr != nil {
				return nil, &LineError{File: file, Line: line, Err: rerr}
			}
			if first, dup := seen[rec.ID]; dup {
				return nil, &LineError{File: file, Line: line, Err: fmt.Errorf("record id %q already used on line %d", rec.ID, first)}
			}
			seen[rec.ID] = line
			out = append(out, rec)
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		buf = append(buf, chunk...)
		if len(buf) > maxLine {
			return nil, fmt.Errorf("line longer than %d MiB", maxLine>>20)
		}
		if err != nil {
			return buf, err
		}
		if !isPrefix {
			return buf, nil
		}
	}
}

func parseRecord(b []byte, line int) (ledger.Record, error) {
	if b[0] != '{' {
		return ledger.Record{}, errors.New("not a JSON object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return ledger.Record{}, fmt.Errorf("invalid JSON: %w", err)
	}
	id := strconv.Itoa(line)
	if raw, ok := fields["id"]; ok && string(bytes.TrimSpace(raw)) == "null" {
		return ledger.Record{}, errors.New(`"id" is null: give a non-empty string or a number, or leave it out to use the line number`)
	} else if ok {
		var s string
		var n json.Number
		switch {
		case json.Unmarshal(raw, &s) == nil && s != "":
			id = s
		case json.Unmarshal(raw, &n) == nil:
			id = n.String()
		default:
			return ledger.Record{}, errors.New(`"id" must be a non-empty string or a number`)
		}
	}
	if err := checkPrintable("record id", id); err != nil {
		return ledger.Record{}, err
	}
	if err := checkNoNUL(b); err != nil {
		return ledger.Record{}, err
	}
	return ledger.Record{ID: id, Line: line, Data: json.RawMessage(bytes.Clone(b))}, nil
}

// EnqueueParams describe one batch.
type EnqueueParams struct {
	Pipeline string
	// Batch id; required (the CLI derives one when --batch is absent).
	Batch string
	// BudgetUSD overrides the pipeline's budget_usd; nil: the pipeline's.
	BudgetUSD *float64
	Records   []ledger.Record
	// File names the input in errors. Default "input".
	File string
	// NoCache makes every job of the batch call the provider even when the
	// pipeline's response cache holds an answer (`triage run --no-cache`).
	// Default false.
	NoCache bool
	// Deadline overrides the pipeline's deadline (`triage run --deadline`);
	// zero: the pipeline's, if any. It is resolved against the enqueue
	// moment and stored with the batch.
	Deadline config.Deadline
	// Now is the enqueue moment a deadline is counted from, in the
	// location whose clock a "06:00" deadline reads; zero: time.Now().
	Now time.Time
}

// Enqueue writes the batch, its records and one River job per record in a
// single transaction: either the whole batch is queued or nothing is.
func Enqueue(ctx context.Context, pool *pgxpool.Pool, schema string, cfg *config.Config, p EnqueueParams) error {
	if err := CheckBatchID(p.Batch); err != nil {
		return err
	}
	pl, err := cfg.Pipeline(p.Pipeline)
	if err != nil {
		return err
	}
	key, _, err := cfg.KeyFor(pl.Name)
	if err != nil {
		return err
	}
	// Every record must render: a field the prompt names but a record lacks
	// is bad input, found now (exit 2, nothing queued), not one dead letter
	// per record at 2 a.m.
	file := p.File
	if file == "" {
		file = "input"
	}
	for _, rec := range p.Records {
		if err := checkPrintable("record id", rec.ID); err != nil {
			return &LineError{File: file, Line: rec.Line, Err: err}
		}
		var fields map[string]any
		if err := json.Unmarshal(rec.Data, &fields); err != nil {
			return &LineError{File: file, Line: rec.Line, Err: fmt.Errorf("invalid JSON: %w", err)}
		}
		if _, err := pl.Render(fields); err != nil {
			return &LineError{File: file, Line: rec.Line, Err: fmt.Errorf("pipeline %q prompt: %w", pl.Name, err)}
		}
	}
	budget := p.BudgetUSD
	if budget == nil && pl.BudgetUSD > 0 {
		b := pl.BudgetUSD
		budget = &b
	}
	deadline := deadlineOf(pl, p)
	// An insert-only client: it needs no workers and starts nothing.
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema})
	if err != nil {
		return fmt.Errorf("enqueue: river client: %w", err)
	}
	params := make([]river.InsertManyParams, len(p.Records))
	opts := &river.InsertOpts{Queue: keys.QueueName(key.Name), MaxAttempts: RiverMaxAttempts(pl)}
	for i, rec := range p.Records {
		params[i] = river.InsertManyParams{
			Args:       Args{Batch: p.Batch, Pipeline: pl.Name, RecordID: rec.ID, Record: rec.Data, NoCache: p.NoCache},
			InsertOpts: opts,
		}
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := ledger.CreateBatch(ctx, tx, ledger.Batch{ID: p.Batch, Pipeline: pl.Name, Key: key.Name, BudgetUSD: budget, Deadline: deadline}, p.Records); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		if len(params) == 0 {
			return nil
		}
		if _, err := rc.InsertManyFastTx(ctx, tx, params); err != nil {
			return fmt.Errorf("enqueue: insert jobs: %w", err)
		}
		return nil
	})
}

// deadlineOf is the moment the batch must be done: p's deadline, else the
// pipeline's, counted from the enqueue moment; nil when neither has one.
func deadlineOf(pl *config.Pipeline, p EnqueueParams) *time.Time {
	d := p.Deadline
	if d.IsZero() {
		d = pl.Deadline
	}
	if d.IsZero() {
		return nil
	}
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	at := d.At(now)
	return &at
}

// RiverMaxAttempts is the River max_attempts of a pipeline's jobs: the
// pipeline's max_attempts plus AttemptHeadroom. The worker itself
// dead-letters a job at the pipeline's limit; the headroom only absorbs runs
// that failed for the worker's own reasons, so River never discards a job
// (which would leave its record neither completed nor dead-lettered).
func RiverMaxAttempts(p *config.Pipeline) int { return p.MaxAttempts + AttemptHeadroom }
