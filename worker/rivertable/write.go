package rivertable

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is what the statements here run on: a pool, a connection or a
// transaction (pgx's own types all satisfy it).
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Waking a job makes a snoozed (scheduled) job available now, as River's
// own JobRetry does for one job; River has no bulk "run now" for a set of
// jobs. Only scheduled jobs are touched: jobs waiting on a retry backoff
// are retryable and keep their backoff.

// wokenAt is the scheduled_at of a job woken with a provider batch's
// answer to apply (or near its deadline): when it was queued, so River,
// which takes available jobs by priority, scheduled_at and id, runs it
// ahead of the records queued after it instead of behind all of them. In
// a night larger than one provider batch the collected answers are then
// applied while the rest of the night's lines are still being written,
// not after the last one, and each applied line drops its answer.
const wokenAt = `least(created_at, now())`

// WakeBatch wakes the snoozed jobs of kind whose args name batch.
func WakeBatch(ctx context.Context, db DBTX, schema, kind, batch string) (int, error) {
	tag, err := db.Exec(ctx, `UPDATE `+Job(schema)+` SET state = 'available', scheduled_at = now()
		WHERE state = 'scheduled' AND kind = $1 AND args->>'batch' = $2`, kind, batch)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// WakeQueue wakes the snoozed jobs of kind in queue.
func WakeQueue(ctx context.Context, db DBTX, schema, kind, queue string) (int, error) {
	tag, err := db.Exec(ctx, `UPDATE `+Job(schema)+` SET state = 'available', scheduled_at = now()
		WHERE state = 'scheduled' AND kind = $1 AND queue = $2`, kind, queue)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// WakeJobs wakes the jobs ids that are snoozed, each at its place in the
// queue by when it was queued (wokenAt): jobs woken with a paid answer to
// apply, or near their batch's deadline.
func WakeJobs(ctx context.Context, db DBTX, schema string, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	tag, err := db.Exec(ctx, `UPDATE `+Job(schema)+` SET state = 'available', scheduled_at = `+wokenAt+`
		WHERE state = 'scheduled' AND id = ANY($1)`, ids)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// WakeJobsOfLines wakes the snoozed jobs of key's provider-batch lines in
// one of states, each at its place in the queue (wokenAt).
func WakeJobsOfLines(ctx context.Context, db DBTX, schema, key string, states []string) error {
	_, err := db.Exec(ctx, `UPDATE `+Job(schema)+` SET state = 'available', scheduled_at = `+wokenAt+`
		WHERE state = 'scheduled' AND id IN (SELECT job_id FROM triage_provider_batch_line
			WHERE key = $1 AND state = ANY($2))`, key, states)
	return err
}

// CancelledJob is a queued job CancelQueued cancelled, with what its
// record's dead letter needs.
type CancelledJob struct {
	JobID    int64
	RecordID string
	Pipeline string
	Record   []byte
	Attempts int
}

// CancelQueued cancels the queued (available, pending, scheduled or
// retryable) jobs of kind whose args name batch and whose record has no
// answer on its way (no provider-batch line submitted or answered). A job
// River fetches meanwhile is skipped: the update re-checks its state.
func CancelQueued(ctx context.Context, db DBTX, schema, kind, batch string) ([]CancelledJob, error) {
	rows, err := db.Query(ctx, `UPDATE `+Job(schema)+` j SET state = 'cancelled', finalized_at = now()
		WHERE j.kind = $1 AND j.args @> jsonb_build_object('batch', $2::text)
		  AND j.state IN ('available', 'pending', 'scheduled', 'retryable')
		  AND NOT EXISTS (SELECT 1 FROM triage_provider_batch_line l
			WHERE l.job_id = j.id AND l.state IN ('submitted', 'answered'))
		RETURNING j.id, coalesce(j.args->>'record_id', ''), coalesce(j.args->>'pipeline', ''),
			coalesce(j.args->'record', 'null'::jsonb), j.attempt`, kind, batch)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (CancelledJob, error) {
		var c CancelledJob
		err := r.Scan(&c.JobID, &c.RecordID, &c.Pipeline, &c.Record, &c.Attempts)
		return c, err
	})
}

// DeleteFinished deletes the finished (cancelled, completed, discarded)
// jobs of kind whose args name batch.
func DeleteFinished(ctx context.Context, db DBTX, schema, kind, batch string) (int, error) {
	tag, err := db.Exec(ctx, `DELETE FROM `+Job(schema)+` WHERE kind = $1 AND args @> jsonb_build_object('batch', $2::text)
		AND state IN ('cancelled', 'completed', 'discarded')`, kind, batch)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// SetQueue moves job id to queue.
func SetQueue(ctx context.Context, db DBTX, schema string, id int64, queue string) error {
	_, err := db.Exec(ctx, `UPDATE `+Job(schema)+` SET queue = $2 WHERE id = $1`, id, queue)
	return err
}

// MoveQueue moves job id from queue from to queue to; a job no longer in
// from stays where it is.
func MoveQueue(ctx context.Context, db DBTX, schema string, id int64, from, to string) error {
	_, err := db.Exec(ctx, `UPDATE `+Job(schema)+` SET queue = $2 WHERE id = $1 AND queue = $3`, id, to, from)
	return err
}

// ReturnProbeQueue moves every job of key's probe queue that is not
// running and is not the live probe of either of key's breakers
// (triage_key_state, triage_storm_state: a half-open breaker whose lease
// has not run out at now, or at the database's clock when now is nil) back
// to queue, and returns how many it moved. Jobs that will end without a
// call (MoveJobsThatCallNot: a paid answer to apply, or available and
// queued before agedBefore) stay until they have run.
func ReturnProbeQueue(ctx context.Context, db DBTX, schema, key, queue, probeQueue string, now, agedBefore *time.Time) (int64, error) {
	tag, err := db.Exec(ctx, `
UPDATE `+Job(schema)+` SET queue = $2
WHERE queue = $3
  AND state IN ('available', 'scheduled', 'retryable', 'pending')
  AND NOT (state = 'available' AND created_at < coalesce($5::timestamptz, '-infinity'))
  AND NOT EXISTS (SELECT 1 FROM triage_provider_batch_line l WHERE l.job_id = `+Job(schema)+`.id AND l.state = 'answered')
  AND id NOT IN (
      SELECT probe_job_id FROM triage_key_state
      WHERE key = $1 AND state = 'half_open' AND probe_job_id IS NOT NULL AND probe_lease_until > coalesce($4::timestamptz, now())
      UNION ALL
      SELECT probe_job_id FROM triage_storm_state
      WHERE key = $1 AND state = 'half_open' AND probe_job_id IS NOT NULL AND probe_lease_until > coalesce($4::timestamptz, now()))`,
		key, queue, probeQueue, now, agedBefore)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// MoveJobsThatCallNot moves the available jobs of queue that will end
// without a call to probeQueue, which is never paused: a job whose record
// holds a paid answer (a batch line answered, not applied yet) applies it,
// and one queued before agedBefore (past the worker's MaxAge) is
// dead-lettered. Neither sends anything, so a key's open breaker or pause
// must not hold them. ReturnProbeQueue leaves them there until they have
// run. agedBefore nil: no job is old enough.
func MoveJobsThatCallNot(ctx context.Context, db DBTX, schema, queue, probeQueue string, agedBefore *time.Time) (int64, error) {
	tag, err := db.Exec(ctx, `
UPDATE `+Job(schema)+` j SET queue = $2
WHERE j.queue = $1 AND j.state = 'available'
  AND (j.created_at < coalesce($3::timestamptz, '-infinity')
       OR EXISTS (SELECT 1 FROM triage_provider_batch_line l WHERE l.job_id = j.id AND l.state = 'answered'))`,
		queue, probeQueue, agedBefore)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// CreatePausedQueue inserts queue's row, paused, unless it exists: River's
// QueuePause needs the row, which River creates only when a client first
// works the queue.
func CreatePausedQueue(ctx context.Context, db DBTX, schema, queue string) error {
	_, err := db.Exec(ctx, `
INSERT INTO `+Queue(schema)+` (name, created_at, metadata, paused_at, updated_at)
VALUES ($1, now(), '{}', now(), now())
ON CONFLICT (name) DO NOTHING`, queue)
	return err
}

// MarkQueued sets metadata key to value on the jobs ids still available or
// scheduled.
func MarkQueued(ctx context.Context, db DBTX, schema string, ids []int64, key, value string) error {
	_, err := db.Exec(ctx, `UPDATE `+Job(schema)+`
			SET metadata = metadata || jsonb_build_object($3::text, $2::text)
			WHERE id = ANY($1) AND state IN ('available', 'scheduled')`, ids, value, key)
	return err
}

// MoveToModel moves job id, in one of states and still in queue from, to
// queue to with model as its args' model, and reports whether it moved. A
// job not running becomes available now. A job with an open provider-batch
// line (not applied) is never moved: its answer is its sending key's, and
// the check lands with the move.
func MoveToModel(ctx context.Context, db DBTX, schema string, id int64, from, to, model string, states []string) (bool, error) {
	tag, err := db.Exec(ctx, `
    UPDATE `+Job(schema)+` SET queue = $2,
        args = args || jsonb_build_object('model', $3::text),
        state = CASE WHEN state = 'running' THEN state ELSE 'available'::river_job_state END,
        scheduled_at = CASE WHEN state = 'running' THEN scheduled_at ELSE now() END
    WHERE id = $1 AND queue = $4 AND state::text = ANY($5)
      AND NOT EXISTS (SELECT 1 FROM triage_provider_batch_line ol WHERE ol.job_id = $1 AND ol.state <> 'applied')`,
		id, to, model, from, states)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}
