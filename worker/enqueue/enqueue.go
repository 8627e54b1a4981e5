package enqueue

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/jobargs"
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

// Params describe one batch.
type Params struct {
	Pipeline string
	// Batch id; required (the CLI derives one when --batch is absent).
	Batch string
	// BudgetUSD overrides the pipeline's budget_usd; nil: the pipeline's.
	BudgetUSD *float64
	// Records are the batch's records when they are already in memory
	// (Batch); JSONL reads them from its reader instead.
	Records []ledger.Record
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
	// Progress, when set, is called after each chunk is written with the
	// records and input bytes written so far (in the open transaction:
	// nothing is visible until the whole input is read). Default nil.
	Progress func(records int, bytes int64)
}

// ErrNoRecords is an JSONL input that holds no record: nothing is
// queued.
var ErrNoRecords = errors.New("holds no records")

// Batch writes the batch, its records and one River job per record in a
// single transaction: either the whole batch is queued or nothing is.
func Batch(ctx context.Context, pool *pgxpool.Pool, schema string, cfg *config.Config, p Params) error {
	_, err := enqueue(ctx, pool, schema, cfg, p, &sliceSource{recs: p.Records}, false)
	return err
}

// JSONL reads a JSONL file from r (as ReadJSONL does) and queues it
// as Batch does, in chunks of bounded size inside one transaction: memory
// stays the same whatever the size of the file, and a bad line anywhere,
// the last one included, still queues nothing. It returns the number of
// records queued. An input without records is ErrNoRecords.
func JSONL(ctx context.Context, pool *pgxpool.Pool, schema string, cfg *config.Config, p Params, r io.Reader) (int, error) {
	return enqueue(ctx, pool, schema, cfg, p, &jsonlSource{br: bufio.NewReaderSize(r, 64<<10)}, true)
}

func fileName(p Params) string {
	if p.File == "" {
		return "input"
	}
	return p.File
}

// A recordSource yields a batch's records in input order: io.EOF after the
// last; any other error is the input's (a bad line, named by its
// *LineError's Line with File left for the caller).
type recordSource interface {
	next() (rec ledger.Record, size int, err error)
}

// jsonlSource reads records one line at a time (ReadJSONL's rules).
type jsonlSource struct {
	br   *bufio.Reader
	line int
	eof  bool
}

func (s *jsonlSource) next() (ledger.Record, int, error) {
	for !s.eof {
		s.line++
		b, err := readLine(s.br)
		if err != nil && !errors.Is(err, io.EOF) {
			return ledger.Record{}, 0, &LineError{Line: s.line, Err: err}
		}
		s.eof = errors.Is(err, io.EOF)
		if t := bytes.TrimSpace(b); len(t) > 0 {
			rec, rerr := parseRecord(t, s.line)
			if rerr != nil {
				return ledger.Record{}, 0, &LineError{Line: s.line, Err: rerr}
			}
			return rec, len(b) + 1, nil
		}
	}
	return ledger.Record{}, 0, io.EOF
}

// sliceSource yields records already in memory.
type sliceSource struct {
	recs []ledger.Record
	i    int
}

func (s *sliceSource) next() (ledger.Record, int, error) {
	if s.i == len(s.recs) {
		return ledger.Record{}, 0, io.EOF
	}
	s.i++
	r := s.recs[s.i-1]
	return r, len(r.Data), nil
}

// Chunk bounds: a chunk is written once it holds enqueueChunkRecords
// records or enqueueChunkBytes of input, whichever comes first. Two chunks
// are in memory at a time (one read while the other is written).
const (
	enqueueChunkRecords = 10_000
	enqueueChunkBytes   = 4 << 20
)

// enqueueChunk is a run of records read, checked and ready to write.
type enqueueChunk struct {
	recs   []ledger.Record
	params []river.InsertManyParams
	bytes  int64
	// suspects index recs whose id the filter has maybe seen in an earlier
	// chunk: the database settles them before the chunk is written.
	suspects []int
	// err is the bad line that ends the input after recs; nil when the
	// input goes on (or ended well, on the last chunk).
	err error
}

// enqueue is Batch over any record source: one goroutine reads and checks
// chunks while this one writes the previous chunk, all in one transaction.
// With needRecords an input without records is ErrNoRecords.
func enqueue(ctx context.Context, pool *pgxpool.Pool, schema string, cfg *config.Config, p Params, src recordSource, needRecords bool) (int, error) {
	if err := CheckBatchID(p.Batch); err != nil {
		return 0, err
	}
	pl, err := cfg.Pipeline(p.Pipeline)
	if err != nil {
		return 0, err
	}
	key, _, err := cfg.KeyFor(pl.Name)
	if err != nil {
		return 0, err
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
		return 0, fmt.Errorf("enqueue: river client: %w", err)
	}
	file := fileName(p)
	lineErr := func(err error) error {
		var le *LineError
		if errors.As(err, &le) && le.File == "" {
			le.File = file
		}
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks := make(chan enqueueChunk, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(chunks)
		readChunks(ctx, pl, src, jobargs.Args{Batch: p.Batch, Pipeline: pl.Name, NoCache: p.NoCache},
			&river.InsertOpts{Queue: keys.QueueName(key.Name), MaxAttempts: jobargs.RiverMaxAttempts(pl)}, chunks)
	}()
	// Stop the reader and wait for it before returning, whatever happens.
	defer wg.Wait()
	defer cancel()

	total := 0
	var written int64
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := ledger.InsertBatch(ctx, tx, ledger.Batch{ID: p.Batch, Pipeline: pl.Name, Key: key.Name, BudgetUSD: budget, Deadline: deadline}); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		for c := range chunks {
			if err := firstDuplicate(ctx, tx, p.Batch, c); err != nil {
				return lineErr(err)
			}
			if c.err != nil {
				return lineErr(c.err)
			}
			if err := ledger.CopyRecords(ctx, tx, p.Batch, c.recs); err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
			if len(c.params) > 0 {
				if _, err := rc.InsertManyFastTx(ctx, tx, c.params); err != nil {
					return fmt.Errorf("enqueue: insert jobs: %w", err)
				}
			}
			total += len(c.recs)
			written += c.bytes
			if p.Progress != nil {
				p.Progress(total, written)
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if total == 0 && needRecords {
			return fmt.Errorf("%s %w", file, ErrNoRecords)
		}
		return ledger.SetBatchTotal(ctx, tx, p.Batch, total)
	})
	if err != nil {
		return 0, err
	}
	return total, nil
}

// firstDuplicate settles the chunk's suspects: the first whose id the batch
// already holds (from an earlier chunk) is a *LineError naming both lines.
func firstDuplicate(ctx context.Context, tx pgx.Tx, batch string, c enqueueChunk) error {
	if len(c.suspects) == 0 {
		return nil
	}
	ids := make([]string, len(c.suspects))
	for i, at := range c.suspects {
		ids[i] = c.recs[at].ID
	}
	lines, err := ledger.RecordLines(ctx, tx, batch, ids)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	for _, at := range c.suspects {
		rec := c.recs[at]
		if first, dup := lines[rec.ID]; dup {
			return duplicateError(rec, first)
		}
	}
	return nil
}

func duplicateError(rec ledger.Record, first int) error {
	return &LineError{Line: rec.Line, Err: fmt.Errorf("record id %q already used on line %d", rec.ID, first)}
}

// readChunks reads src into chunks until it ends, a line is bad (the chunk
// carrying the error is the last) or ctx is done. Every record must render:
// a field the prompt names but a record lacks is bad input, found now
// (nothing queued), not one dead letter per record at 2 a.m.
func readChunks(ctx context.Context, pl *config.Pipeline, src recordSource, args jobargs.Args, opts *river.InsertOpts, out chan<- enqueueChunk) {
	seen := newIDFilter()
	var c enqueueChunk
	inChunk := map[string]int{}
	send := func() bool {
		select {
		case out <- c:
			c = enqueueChunk{}
			clear(inChunk)
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		rec, size, err := src.next()
		if errors.Is(err, io.EOF) {
			send()
			return
		}
		if err == nil {
			err = checkRecord(pl, rec)
		}
		if err == nil {
			if first, dup := inChunk[rec.ID]; dup {
				err = duplicateError(rec, first)
			}
		}
		if err != nil {
			c.err = err
			send()
			return
		}
		inChunk[rec.ID] = rec.Line
		if seen.mayContain(rec.ID) {
			c.suspects = append(c.suspects, len(c.recs))
		}
		seen.add(rec.ID)
		a := args
		a.RecordID, a.Record = rec.ID, rec.Data
		c.recs = append(c.recs, rec)
		c.params = append(c.params, river.InsertManyParams{Args: a, InsertOpts: opts})
		c.bytes += int64(size)
		if len(c.recs) >= enqueueChunkRecords || c.bytes >= enqueueChunkBytes {
			if !send() {
				return
			}
		}
	}
}

// checkRecord is the per-record check of an enqueue: a printable id, a
// JSON object, a prompt that renders. The error names the line.
func checkRecord(pl *config.Pipeline, rec ledger.Record) error {
	if err := checkPrintable("record id", rec.ID); err != nil {
		return &LineError{Line: rec.Line, Err: err}
	}
	var fields map[string]any
	if err := json.Unmarshal(rec.Data, &fields); err != nil {
		return &LineError{Line: rec.Line, Err: fmt.Errorf("invalid JSON: %w", err)}
	}
	if _, err := pl.Render(fields); err != nil {
		return &LineError{Line: rec.Line, Err: fmt.Errorf("pipeline %q prompt: %w", pl.Name, err)}
	}
	return nil
}

// deadlineOf is the moment the batch must be done: p's deadline, else the
// pipeline's, counted from the enqueue moment; nil when neither has one.
func deadlineOf(pl *config.Pipeline, p Params) *time.Time {
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
