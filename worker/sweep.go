package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
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
// sweepWindow (River's state-and-finalized_at index) that have neither a
// result nor a dead letter. A job triage cancels itself always has its dead
// letter first; one requeued since has a requeued dead letter naming it.
func (r *Runtime) recentOrphans(ctx context.Context) ([]orphan, error) {
	rows, err := r.pool.Query(ctx, `SELECT j.id, j.args, j.state::text, j.attempt,
			coalesce(j.errors[array_length(j.errors, 1)]->>'error', '')
		FROM `+rivertable.Job(r.opts.Schema)+` j
		WHERE j.state IN ('discarded', 'cancelled') AND j.finalized_at > now() - make_interval(secs => $2)
		  AND j.kind = $1
		  AND NOT EXISTS (SELECT 1 FROM triage_result t
			WHERE t.batch = j.args->>'batch' AND t.record_id = j.args->>'record_id')
		  AND NOT EXISTS (SELECT 1 FROM triage_dead_letter d
			WHERE d.batch = j.args->>'batch' AND d.record_id = j.args->>'record_id'
			  AND (d.requeued_at IS NULL OR d.job_id = j.id))
		LIMIT $3`, Kind, sweepWindow.Seconds(), sweepLimit)
	if err != nil {
		return nil, fmt.Errorf("recent finished jobs: %w", err)
	}
	defer rows.Close()
	var out []orphan
	for rows.Next() {
		var (
			o    orphan
			raw  []byte
			args Args
		)
		if err := rows.Scan(&o.jobID, &raw, &o.state, &o.attempt, &o.lastErr); err != nil {
			return nil, fmt.Errorf("recent finished jobs: %w", err)
		}
		if json.Unmarshal(raw, &args) != nil {
			continue
		}
		o.batch, o.recordID, o.pipeline, o.record = args.Batch, args.RecordID, args.Pipeline, args.Record
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recent finished jobs: %w", err)
	}
	return out, nil
}

// stuckOrphans are the unfinished records of batches that cannot settle by
// themselves: unsettled, created within MaxAge (older jobs are dead-lettered
// snoozed_out anyway), with no call started for quiet (a batch being worked
// is skipped before anything costly is asked), and with no job of theirs
// left to run in River. Each
// comes with its latest job, if any, to say how it ended. The job checks use
// River's GIN index on args: an unsettled batch that still has live jobs
// costs one probe.
func (r *Runtime) stuckOrphans(ctx context.Context, quiet time.Duration) ([]orphan, error) {
	job := rivertable.Job(r.opts.Schema)
	// Each step is MATERIALIZED so that it runs in this order and an empty
	// step ends the query: the counts first (for a settled batch two
	// index-only counts are cheaper than asking River's args index for every
	// job the batch ever had), then one args-index probe per unsettled
	// batch, then the records of stuck batches only. No ORDER BY before the
	// LIMIT: it would make the planner walk every record in line order.
	rows, err := r.pool.Query(ctx, `WITH unsettled AS MATERIALIZED (
			SELECT b.id, b.pipeline FROM triage_batch b
			WHERE b.created_at > now() - make_interval(secs => $2)
			  AND NOT EXISTS (SELECT 1 FROM triage_attempt a
				WHERE a.key = b.key AND a.started_at > now() - make_interval(secs => $4) AND a.batch = b.id)
			  AND b.total > (SELECT count(*) FROM triage_result t WHERE t.batch = b.id)
				+ (SELECT count(*) FROM triage_dead_letter d WHERE d.batch = b.id AND d.requeued_at IS NULL)
		), stuck AS MATERIALIZED (
			SELECT u.id, u.pipeline FROM unsettled u
			WHERE NOT EXISTS (SELECT 1 FROM `+job+` j
				WHERE j.args @> jsonb_build_object('batch', u.id) AND j.kind = $1
				  AND j.state IN ('available', 'pending', 'running', 'scheduled', 'retryable'))
		), orphans AS MATERIALIZED (
			SELECT rec.batch, rec.record_id, rec.line, s.pipeline, rec.data
			FROM stuck s
			JOIN triage_record rec ON rec.batch = s.id
			WHERE NOT EXISTS (SELECT 1 FROM triage_result t WHERE t.batch = rec.batch AND t.record_id = rec.record_id)
			  AND NOT EXISTS (SELECT 1 FROM triage_dead_letter d
				WHERE d.batch = rec.batch AND d.record_id = rec.record_id AND d.requeued_at IS NULL)
			LIMIT $3
		)
		SELECT o.batch, o.record_id, o.pipeline, o.data,
			coalesce(j.id, 0), coalesce(j.state::text, ''), coalesce(j.attempt, 0),
			coalesce(j.errors[array_length(j.errors, 1)]->>'error', '')
		FROM orphans o
		-- The record's latest job, through River's args index: max(id + 0),
		-- because ORDER BY id DESC LIMIT 1 or a plain max(id) lets the
		-- planner walk river_job's primary key backwards over every job.
		LEFT JOIN LATERAL (
			SELECT max(l.id + 0) AS id FROM `+job+` l
			WHERE l.args @> jsonb_build_object('batch', o.batch, 'record_id', o.record_id) AND l.kind = $1
		) latest ON true
		LEFT JOIN `+job+` j ON j.id = latest.id
		ORDER BY o.batch, o.line`, Kind, r.opts.MaxAge.Seconds(), sweepLimit, quiet.Seconds())
	if err != nil {
		return nil, fmt.Errorf("stuck batches: %w", err)
	}
	defer rows.Close()
	var out []orphan
	for rows.Next() {
		var o orphan
		if err := rows.Scan(&o.batch, &o.recordID, &o.pipeline, &o.record, &o.jobID, &o.state, &o.attempt, &o.lastErr); err != nil {
			return nil, fmt.Errorf("stuck batches: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stuck batches: %w", err)
	}
	return out, nil
}
