package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/rivertable"
)

// ReasonDiscarded is the dead-letter reason of a job River gave up on by
// itself (its runs kept failing for the worker's own reasons, or it was
// rescued after a crash on its last attempt).
const ReasonDiscarded = "discarded"

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

// Sweep runs both sweeps now, the stuck-batch one without waiting for
// batches to be quiet (see sweep): for a process about to exit, such as
// `triage work --exit-when-idle` with nothing left to run.
func (r *Runtime) Sweep(ctx context.Context) { r.sweepNow(ctx, true, 0) }

// sweep dead-letters orphans, so every record ends somewhere a human looks
// and every batch can settle: jobs River discarded (AttemptHeadroom makes
// this rare), jobs cancelled by hand (River's CLI or UI) and, by the
// stuck-batch sweep, jobs deleted by hand.
func (r *Runtime) sweep(ctx context.Context, tick int) {
	// A batch is examined once no call of it started for two stuck-sweep
	// periods: by then a batch being worked has shown it.
	r.sweepNow(ctx, tick%stuckSweepEvery == 0, 2*stuckSweepEvery*r.opts.SpendCheck)
}

// sweepNow runs the quick sweep and, with stuck, the stuck-batch sweep for
// batches quiet that long.
func (r *Runtime) sweepNow(ctx context.Context, stuck bool, quiet time.Duration) {
	found, err := r.recentOrphans(ctx)
	if err == nil && stuck {
		var more []orphan
		more, err = r.stuckOrphans(ctx, quiet)
		found = append(found, more...)
	}
	if err != nil && ctx.Err() == nil {
		r.log.WarnContext(ctx, "sweep finished jobs", "err", err)
	}
	seen := map[[2]string]bool{}
	for _, o := range found {
		if seen[[2]string{o.batch, o.recordID}] {
			continue // found by both sweeps
		}
		seen[[2]string{o.batch, o.recordID}] = true
		row := r.orphanDeadLetter(o)
		id, err := ledger.AddDeadLetter(ctx, r.pool, row)
		if errors.Is(err, ledger.ErrHasResult) {
			continue // completed since it was found
		}
		if err != nil {
			r.log.WarnContext(ctx, "dead-letter a finished job", "job_id", o.jobID, "batch", o.batch, "record_id", o.recordID, "err", err)
			continue
		}
		r.log.WarnContext(ctx, "dead letter", "dead_letter_id", id, "batch", o.batch, "record_id", o.recordID,
			"class", row.Class, "reason", row.Reason, "job_id", o.jobID)
	}
}

// orphanDeadLetter is the dead letter an orphan gets, by how its job ended.
func (r *Runtime) orphanDeadLetter(o orphan) ledger.DeadLetterRow {
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
	if p, err := r.cfg.Pipeline(o.pipeline); err == nil {
		if k, _, err := r.cfg.KeyFor(p.Name); err == nil {
			row.Key = k.Name
		}
	}
	return row
}

// recentOrphans are the records of jobs discarded or cancelled within
// sweepWindow that have neither a result nor a dead letter
// (rivertable.RecentlyEnded). A job triage cancels itself always has its dead
// letter first; one requeued since has a requeued dead letter naming it.
func (r *Runtime) recentOrphans(ctx context.Context) ([]orphan, error) {
	jobs, err := rivertable.RecentlyEnded(ctx, r.pool, r.opts.Schema, jobargs.Kind, sweepWindow, sweepLimit)
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
func (r *Runtime) stuckOrphans(ctx context.Context, quiet time.Duration) ([]orphan, error) {
	jobs, err := rivertable.StuckRecords(ctx, r.pool, r.opts.Schema, jobargs.Kind, r.opts.MaxAge, quiet, sweepLimit)
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
