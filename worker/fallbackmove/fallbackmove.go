// Package fallbackmove moves the queued jobs of a key whose breaker has
// been open longer than their pipeline's fallback_grace to their first
// capable fallback model. Those jobs are not fetched (the key's queue is
// paused), so no run of theirs could decide it: the Mover asks
// decide.Before on their behalf, with the job's open line as a fact, so
// the open-line rule (ledger.LineHold) holds: a record whose line is in a
// live provider batch, or holds a paid answer, is not moved. Jobs no
// fallback can serve stay where they are, parked, marked so that they are
// looked at once per opening of the breaker.
//
// Move is the one move of a job to a fallback's key queue, for the Mover
// and for a run that moves itself (the worker's decide.ReactFallback). The
// statements are worker/rivertable's (ListQueued, MoveToModel,
// MarkQueued) and ledger's (OpenBatchLines, FallbackRoom, CountFallback,
// TakeBackBatchLine).
package fallbackmove

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/facts"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/rivertable"
	"github.com/triage-dev/triage/worker/service"
)

// TickDefault is how often the Mover looks at the keys whose breaker is
// open (jittered).
const TickDefault = time.Second

// metaNoFallback marks a job the Mover found no capable fallback for, with
// the opening of the breaker it looked under, so it is looked at once per
// opening, not every tick.
const metaNoFallback = "triage_no_fallback"

// batchSize is how many of a key's jobs one pass looks at.
const batchSize = 500

// Plan is what the Mover needs to know of a queued job, from the worker
// that renders it: its pipeline, its current model, and what its rendered
// request asks of a model.
type Plan struct {
	Pipeline *config.Pipeline
	Model    *config.Model
	Need     decide.Need
}

// StatusReader reads a key's shared breaker state (keys.Store).
type StatusReader interface {
	KeyStatus(ctx context.Context, key string) (*keys.KeyStatus, error)
}

// Config is what a Mover works with. Pool, Config, Status and Plan are
// required (Validate); Tick and Logger have defaults (WithDefaults).
type Config struct {
	// Pool reaches triage's tables and River's.
	Pool *pgxpool.Pool
	// Schema is River's ("" for the search_path).
	Schema string
	// Config holds the pipelines and their fallbacks.
	Config *config.Config
	// Status reads a key's breakers.
	Status StatusReader
	// Keys are the keys this process works: their queues are looked at.
	Keys []string
	// Plan looks a queued job up and renders it; false leaves the job to
	// its own run (it cannot be looked up or rendered, or its pipeline has
	// no fallback).
	Plan func(job *river.Job[jobargs.Args]) (Plan, bool)
	// Tick is how often a pass runs (Start); default TickDefault.
	Tick time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns cfg with its zero optional fields filled.
func (cfg Config) WithDefaults() Config {
	cfg.Tick = cmp.Or(cfg.Tick, TickDefault)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return cfg
}

// Validate refuses a config a Mover cannot work with, naming the field.
func (cfg Config) Validate() error {
	if cfg.Tick < 0 {
		return fmt.Errorf("fallbackmove: Config.Tick must not be negative, got %v (0 takes the default)", cfg.Tick)
	}
	return service.Required("fallbackmove", service.Field{Name: "Pool", Missing: cfg.Pool == nil},
		service.Field{Name: "Config", Missing: cfg.Config == nil}, service.Field{Name: "Status", Missing: cfg.Status == nil},
		service.Field{Name: "Plan", Missing: cfg.Plan == nil})
}

// Result is what one pass did.
type Result struct {
	// Moved is how many jobs went to a fallback.
	Moved int
	// Marked is how many were marked to be left alone under this opening
	// (no capable fallback, or no room under fallback_max_share).
	Marked int
}

// TestSignals are sent to by a running Mover when set (tests): each pass's
// Result, without blocking.
type TestSignals struct {
	Passes chan Result
}

// Mover moves the jobs of open keys to their fallbacks: RunOnce is one
// pass, Start runs one every Tick until Stop.
type Mover struct {
	cfg         Config
	TestSignals TestSignals
	loop        service.Loop
}

// New returns a Mover, or Validate's error.
func New(cfg Config) (*Mover, error) {
	return service.New(cfg, func(cfg Config) *Mover { return &Mover{cfg: cfg} })
}

// Start runs a pass now and then every Tick (jittered) until Stop. With no
// pipeline that has a fallback it runs nothing.
func (m *Mover) Start(ctx context.Context) {
	if !slices.ContainsFunc(m.cfg.Config.Pipelines, func(p config.Pipeline) bool { return len(p.Fallback) > 0 }) {
		return
	}
	m.loop.Start(ctx, m.cfg.Tick, 0.8, 1.2, func(ctx context.Context) {
		service.Signal(m.TestSignals.Passes, m.RunOnce(ctx))
	})
}

// Stop ends the passes and waits for the one under way.
func (m *Mover) Stop() { m.loop.Stop() }

// RunOnce looks at every key's queue once; a key's error is logged and
// the next key looked at.
func (m *Mover) RunOnce(ctx context.Context) Result {
	var total Result
	for _, key := range m.cfg.Keys {
		res, err := m.moveKey(ctx, key)
		if err != nil && ctx.Err() == nil {
			m.cfg.Logger.WarnContext(ctx, "fallback mover", "key", key, "err", err)
		}
		total.Moved += res.Moved
		total.Marked += res.Marked
	}
	return total
}

// moveKey is one pass over key's queue, while one of its breakers is open.
func (m *Mover) moveKey(ctx context.Context, key string) (Result, error) {
	var res Result
	st, err := m.cfg.Status.KeyStatus(ctx, key)
	if err != nil {
		return res, err
	}
	breaker, opened := keys.BreakerExhausted, st.OpenedAt
	if st.State == keys.StateClosed || opened == nil {
		breaker, opened = keys.BreakerStorm, st.Storm.OpenedAt
		if st.Storm.State == keys.StateClosed || opened == nil {
			return res, nil
		}
	}
	openFor := st.Now.Sub(*opened)
	marker := breaker.String() + ":" + opened.UTC().Format(time.RFC3339Nano)
	queue := keys.QueueName(key)
	found, err := rivertable.ListQueued(ctx, m.cfg.Pool, m.cfg.Schema, queue, jobargs.Kind, metaNoFallback, marker, batchSize)
	if err != nil {
		return res, fmt.Errorf("list queued jobs: %w", err)
	}
	ids := make([]int64, len(found))
	for i, f := range found {
		ids[i] = f.ID
	}
	lines, err := ledger.OpenBatchLines(ctx, m.cfg.Pool, ids)
	if err != nil {
		return res, err
	}
	var skip []int64 // no capable fallback, or no room under the share
	for _, f := range found {
		job := &river.Job[jobargs.Args]{JobRow: &rivertype.JobRow{ID: f.ID, Attempt: f.Attempt, CreatedAt: f.CreatedAt, Metadata: f.Metadata}}
		if err := json.Unmarshal(f.Args, &job.Args); err != nil {
			continue
		}
		plan, ok := m.cfg.Plan(job)
		if !ok {
			continue
		}
		p := plan.Pipeline
		fb := decide.FallbackFacts{Model: decide.FirstCapable(m.cfg.Config, p, plan.Model.Name, plan.Need), OpenFor: &openFor, Grace: p.FallbackGrace}
		line := lines[job.ID]
		rx := decide.Before(decide.BeforeCall{MaxAttempts: p.MaxAttempts, MaxSnoozes: p.MaxSnoozes,
			Admission: facts.Admission(keys.Admission{Breaker: breaker}), Fallback: fb, Line: facts.Line(line.Hold())})
		switch {
		case rx.Kind == decide.ReactFallback:
			moved, err := Move(ctx, m.cfg.Pool, m.cfg.Schema, Job{ID: job.ID, Args: job.Args, Queue: queue, Line: line},
				rx.Fallback.Model, p.FallbackMaxShare, QueuedStates)
			if err != nil {
				return res, err
			}
			if !moved {
				// fallback_max_share reached (the count never goes down):
				// not again under this opening. Without a share, the job
				// was fetched meanwhile (a run, the key's probe, which
				// gives it back) or took a line: looked at again next tick.
				if p.FallbackMaxShare > 0 {
					skip = append(skip, job.ID)
				}
				continue
			}
			res.Moved++
			m.cfg.Logger.InfoContext(ctx, "fallback", "job_id", job.ID, "batch", job.Args.Batch, "record_id", job.Args.RecordID,
				"from_model", plan.Model.Name, "to_model", rx.Fallback.Model.Name, "to_key", rx.Fallback.Model.Key, "breaker", breaker.String())
		case fb.Model == nil:
			skip = append(skip, job.ID)
		}
	}
	if len(skip) > 0 {
		if err := rivertable.MarkQueued(ctx, m.cfg.Pool, m.cfg.Schema, skip, metaNoFallback, marker); err != nil {
			return res, fmt.Errorf("mark jobs without a capable fallback: %w", err)
		}
		res.Marked = len(skip)
	}
	return res, nil
}

// The states a moved job may be in: a run moving itself is running; the
// Mover moves jobs still queued.
var (
	RunningStates = []string{"running"}
	QueuedStates  = []string{"available", "scheduled"}
)

// Job is the job Move moves, as its caller read it.
type Job struct {
	ID   int64
	Args jobargs.Args
	// Queue is the queue it is on (its key's).
	Queue string
	// Line is its open batch line (ID 0: none).
	Line ledger.BatchLine
}

// Move moves job j to model to's key queue and counts the move against
// the batch's fallback_max_share, in one transaction: the count and the
// move land together or not at all. With a share, the batch's row is
// locked first (ledger.FallbackRoom), so two moves at once cannot both
// take the last place under it; the lock order (batch, then job) is that
// of a job's completion. share <= 0 is no bound; only a job leaving its
// own model (Args.Model "") is counted. states: the states the job may be
// in (RunningStates for a job moving itself, QueuedStates for the Mover).
// It returns false when the share refused it, the job was no longer
// there, or it holds an open line (checked in the move's statement:
// rivertable.MoveToModel). j.Line is the job's open line as its caller
// read it: an unsent one is taken back in the same transaction as the
// move; one that went into a provider batch meanwhile keeps the job where
// it is.
func Move(ctx context.Context, pool *pgxpool.Pool, schema string, j Job, to *config.Model, share float64, states []string) (bool, error) {
	count := j.Args.Model == ""
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if j.Line.Hold() == ledger.HoldUnsent {
			took, err := ledger.TakeBackBatchLine(ctx, tx, j.Line.ID, j.Line.AttemptID)
			if err != nil || !took {
				if err == nil {
					err = errNotMoved // sent meanwhile: it stays
				}
				return err
			}
		}
		if count && share > 0 {
			room, err := ledger.FallbackRoom(ctx, tx, j.Args.Batch, share)
			if err != nil {
				return err
			}
			if !room {
				return errNotMoved
			}
		}
		moved, err := rivertable.MoveToModel(ctx, tx, schema, j.ID, j.Queue, keys.QueueName(to.Key), to.Name, states)
		if err != nil {
			return err
		}
		if !moved {
			// Nothing moved: a line taken back stays the job's.
			return errNotMoved
		}
		if count {
			return ledger.CountFallback(ctx, tx, j.Args.Batch)
		}
		return nil
	})
	if errors.Is(err, errNotMoved) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("move job %d to fallback %q: %w", j.ID, to.Name, err)
	}
	return true, nil
}

var errNotMoved = errors.New("not moved")
