// Package sweep dead-letters the records whose job ended without the
// worker deciding an outcome (orphans), so that every record ends somewhere
// a human looks and every batch can settle: jobs River discarded
// (jobargs.AttemptHeadroom makes this rare), jobs cancelled by hand (River's
// CLI or UI) and, by the stuck-batch sweep, jobs deleted by hand. Every
// worker process runs it on each spend check (Tick); a process about to
// exit runs it once more (Now). The statements are worker/rivertable's
// (RecentlyEnded, StuckRecords); the dead letters are ledger's.
package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/rivertable"
	"github.com/triage-dev/triage/worker/service"
)

// ReasonDiscarded is the dead-letter reason of a job River gave up on by
// itself (its runs kept failing for the worker's own reasons, or it was
// rescued after a crash on its last attempt).
const ReasonDiscarded = "discarded"

// Config is what a Sweeper works with. Pool, Config, MaxAge and Every are
// required (Validate); Logger has a default (WithDefaults).
type Config struct {
	// Pool reaches triage's tables and River's.
	Pool *pgxpool.Pool
	// Schema is River's ("" for the search_path).
	Schema string
	// Config names each pipeline's key, for the dead letter's key.
	Config *config.Config
	// MaxAge: batches created longer ago are not looked at by the
	// stuck-batch sweep (their jobs are dead-lettered snoozed_out anyway):
	// the worker's MaxAge. Required.
	MaxAge time.Duration
	// Every is how often Tick is called (the worker's SpendCheck): a batch
	// is quiet after two stuck-sweep periods of it.
	Every time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns cfg with its zero optional fields filled.
func (cfg Config) WithDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// Validate refuses a config a Sweeper cannot work with, naming the field.
func (cfg Config) Validate() error {
	switch {
	case cfg.Every <= 0:
		return fmt.Errorf("sweep: Config.Every must be positive, got %v", cfg.Every)
	case cfg.MaxAge <= 0:
		return fmt.Errorf("sweep: Config.MaxAge must be positive, got %v", cfg.MaxAge)
	}
	return service.Required("sweep", service.Field{Name: "Pool", Missing: cfg.Pool == nil},
		service.Field{Name: "Config", Missing: cfg.Config == nil})
}

// Sweeper runs the sweeps; it is safe for use by one goroutine at a time.
type Sweeper struct{ cfg Config }

// New returns a Sweeper, or Validate's error.
func New(cfg Config) (*Sweeper, error) {
	return service.New(cfg, func(cfg Config) *Sweeper { return &Sweeper{cfg: cfg} })
}

// Sweep tuning. The quick sweep runs on every spend check and looks only at
// jobs finished lately, so its cost does not grow with the day's dead
// letters; the stuck-batch sweep is the net under it: it finds, for every
// batch with nothing left in River, the records that ended nowhere, however
// their job ended or vanished, and it runs every stuckSweepEvery checks.
const (
	sweepWindow     = 10 * time.Minute
	sweepLimit      = 500
	stuckSweepEvery = 15
)

// orphan is a record whose job ended without the worker deciding an outcome:
// neither a result nor a live dead letter.
type orphan struct {
	batch, recordID, pipeline string
	record                    json.RawMessage
	// jobID, state, attempt and lastErr describe the record's latest job;
	// state "" when it has none (deleted).
	jobID   int64
	state   string
	attempt int
	lastErr string
}

// Now runs both sweeps now, the stuck-batch one without waiting for
// batches to be quiet (see Tick): for a process about to exit, such as
// `triage work --exit-when-idle` with nothing left to run.
func (s *Sweeper) Now(ctx context.Context) { s.runOnce(ctx, true, 0) }

// Tick is the sweep of the tick-th spend check (counted from 0): the quick
// sweep every time, the stuck-batch one every stuckSweepEvery ticks. A
// batch is examined once no call of it started for two stuck-sweep periods:
// by then a batch being worked has shown it.
func (s *Sweeper) Tick(ctx context.Context, tick int) {
	s.runOnce(ctx, tick%stuckSweepEvery == 0, 2*stuckSweepEvery*s.cfg.Every)
}

// runOnce runs the quick sweep and, with stuck, the stuck-batch sweep for
// batches quiet that long.
func (s *Sweeper) runOnce(ctx context.Context, stuck bool, quiet time.Duration) {
	found, err := s.recentOrphans(ctx)
	if err == nil && stuck {
		var more []orphan
		more, err = s.stuckOrphans(ctx, quiet)
		found = append(found, more...)
	}
	if err != nil && ctx.Err() == nil {
		s.cfg.Logger.WarnContext(ctx, "sweep finished jobs", "err", err)
	}
	seen := map[[2]string]bool{}
	for _, o := range found {
		if seen[[2]string{o.batch, o.recordID}] {
			continue // found by both sweeps
		}
		seen[[2]string{o.batch, o.recordID}] = true
		row := s.deadLetter(o)
		id, err := ledger.AddDeadLetter(ctx, s.cfg.Pool, row)
		if errors.Is(err, ledger.ErrHasResult) {
			continue // completed since it was found
		}
		if err != nil {
			s.cfg.Logger.WarnContext(ctx, "dead-letter a finished job", "job_id", o.jobID, "batch", o.batch, "record_id", o.recordID, "err", err)
			continue
		}
		s.cfg.Logger.WarnContext(ctx, "dead letter", "dead_letter_id", id, "batch", o.batch, "record_id", o.recordID,
			"class", row.Class, "reason", row.Reason, "job_id", o.jobID)
	}
}

// deadLetter is the dead letter an orphan gets, by how its job ended.
func (s *Sweeper) deadLetter(o orphan) ledger.DeadLetterRow {
	row := ledger.DeadLetterRow{
		Batch: o.batch, RecordID: o.recordID, JobID: o.jobID, Pipeline: o.pipeline,
		Attempts: o.attempt, Request: o.record,
	}
	switch o.state {
	case "discarded":
		row.Class, row.Reason = classify.Transient, ReasonDiscarded
		row.ErrorExcerpt = "River discarded the job after its last attempt; last error: " + o.lastErr
	case "cancelled":
		// A person took the record out (River's CLI or UI): nothing is
		// resent; `triage dlq requeue` brings it back.
		row.Class, row.Reason = classify.Rejected, ledger.ReasonCancelledByHand
		row.ErrorExcerpt = "the job was cancelled outside triage (River's CLI or UI) before it had an outcome"
	default:
		row.Class, row.Reason = classify.Rejected, ledger.ReasonJobMissing
		row.ErrorExcerpt = "the record has no job left in River (deleted by hand, or removed after it ended without an outcome)"
		if o.state != "" {
			row.ErrorExcerpt = fmt.Sprintf("the record's last job is %s but the record has no result", o.state)
		}
	}
	if p, err := s.cfg.Config.Pipeline(o.pipeline); err == nil {
		if k, _, err := s.cfg.Config.KeyFor(p.Name); err == nil {
			row.Key = k.Name
		}
	}
	return row
}

// recentOrphans are the records of jobs discarded or cancelled within
// sweepWindow that have neither a result nor a dead letter
// (rivertable.RecentlyEnded). A job triage cancels itself always has its dead
// letter first; one requeued since has a requeued dead letter naming it.
func (s *Sweeper) recentOrphans(ctx context.Context) ([]orphan, error) {
	jobs, err := rivertable.RecentlyEnded(ctx, s.cfg.Pool, s.cfg.Schema, jobargs.Kind, sweepWindow, sweepLimit)
	if err != nil {
		return nil, fmt.Errorf("recent finished jobs: %w", err)
	}
	var out []orphan
	for _, j := range jobs {
		var args jobargs.Args
		if json.Unmarshal(j.Args, &args) != nil {
			continue
		}
		out = append(out, orphan{batch: args.Batch, recordID: args.RecordID, pipeline: args.Pipeline, record: args.Record,
			jobID: j.JobID, state: j.State, attempt: j.Attempt, lastErr: j.LastError})
	}
	return out, nil
}

// stuckOrphans are the unfinished records of batches that cannot settle by
// themselves: unsettled, created within MaxAge (older jobs are dead-lettered
// snoozed_out anyway), with no call started for quiet (a batch being worked
// is skipped before anything costly is asked), and with no job of theirs
// left to run in River (rivertable.StuckRecords). Each comes with its latest
// job, if any, to say how it ended.
func (s *Sweeper) stuckOrphans(ctx context.Context, quiet time.Duration) ([]orphan, error) {
	jobs, err := rivertable.StuckRecords(ctx, s.cfg.Pool, s.cfg.Schema, jobargs.Kind, s.cfg.MaxAge, quiet, sweepLimit)
	if err != nil {
		return nil, fmt.Errorf("stuck batches: %w", err)
	}
	out := make([]orphan, len(jobs))
	for i, j := range jobs {
		out[i] = orphan{batch: j.Batch, recordID: j.RecordID, pipeline: j.Pipeline, record: j.Record,
			jobID: j.JobID, state: j.State, attempt: j.Attempt, lastErr: j.LastError}
	}
	return out, nil
}
