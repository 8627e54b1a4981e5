package rivertable

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// QueuePaused reads queue's river_queue row: whether it is paused, and
// whether it exists (River creates it when a client first works the queue).
func QueuePaused(ctx context.Context, db DBTX, schema, queue string) (paused, exists bool, err error) {
	err = db.QueryRow(ctx, `SELECT paused_at IS NOT NULL FROM `+Queue(schema)+` WHERE name = $1`, queue).Scan(&paused)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return paused, true, nil
}

// LockNextProbeJob locks (FOR UPDATE SKIP LOCKED, until db's transaction
// ends) the available job of queue to send a key's probe, and returns its
// id, or 0 when none is available. Jobs that cannot call come last: fewer
// than attemptsLeft attempts left, or created before maxAge (nil: no age
// limit). Then River's order: priority, scheduled_at, id.
func LockNextProbeJob(ctx context.Context, db DBTX, schema, queue string, attemptsLeft int, maxAge *time.Time) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, `
SELECT id FROM `+Job(schema)+`
WHERE queue = $1 AND state = 'available'
ORDER BY (max_attempts - attempt < $2 OR created_at < coalesce($3::timestamptz, '-infinity')), priority, scheduled_at, id
LIMIT 1
FOR UPDATE SKIP LOCKED`, queue, attemptsLeft, maxAge).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return id, err
}

// CountLeft counts the jobs of queues not finished (available, pending,
// running, scheduled or retryable), leaving out those of batches paused at
// their spend cap or by hand (triage_batch): they wait for a human, not for
// a process.
func CountLeft(ctx context.Context, db DBTX, schema string, queues []string) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM `+Job(schema)+` j
		WHERE j.queue = ANY($1) AND j.state IN ('available', 'pending', 'running', 'scheduled', 'retryable')
		  AND NOT EXISTS (SELECT 1 FROM triage_batch b WHERE b.id = j.args->>'batch' AND b.state IN ('paused_budget', 'paused'))`, queues).Scan(&n)
	return n, err
}

// CountOfPausedBatches counts, by batch, the jobs of kind in queues not
// finished whose batch is paused by hand (triage_batch).
func CountOfPausedBatches(ctx context.Context, db DBTX, schema, kind string, queues []string) (map[string]int, error) {
	rows, err := db.Query(ctx, `SELECT b.id, count(*) FROM `+Job(schema)+` j
		JOIN triage_batch b ON b.id = j.args->>'batch'
		WHERE j.queue = ANY($1) AND j.kind = $2 AND j.state IN ('available', 'pending', 'running', 'scheduled', 'retryable')
		  AND b.state = 'paused'
		GROUP BY b.id ORDER BY b.id`, queues, kind)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	var id string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error { out[id] = n; return nil })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CountBatchLive counts the jobs of kind whose args name batch that are not
// finished, running ones apart.
func CountBatchLive(ctx context.Context, db DBTX, schema, kind, batch string) (running, queued int, err error) {
	err = db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'running'), count(*) FILTER (WHERE state <> 'running')
		FROM `+Job(schema)+` WHERE kind = $1 AND args @> jsonb_build_object('batch', $2::text)
		  AND state IN ('available', 'pending', 'running', 'scheduled', 'retryable')`, kind, batch).Scan(&running, &queued)
	return running, queued, err
}

// BatchRunning reads, for the jobs of kind whose args name batch, when each
// running one's current run began (attempted_at), oldest first, and how
// many are queued (available, pending, scheduled or retryable), with the
// database's clock when it read them.
func BatchRunning(ctx context.Context, db DBTX, schema, kind, batch string) (now time.Time, since []time.Time, queued int, err error) {
	err = db.QueryRow(ctx, `SELECT now(),
		coalesce(array_agg(coalesce(attempted_at, now()) ORDER BY attempted_at) FILTER (WHERE state = 'running'), '{}'),
		count(*) FILTER (WHERE state <> 'running')
		FROM `+Job(schema)+` WHERE kind = $1 AND args @> jsonb_build_object('batch', $2::text)
		  AND state IN ('available', 'pending', 'running', 'scheduled', 'retryable')`, kind, batch).
		Scan(&now, &since, &queued)
	return now, since, queued, err
}

// QueuedJob is a job ListQueued found: its row as the fallback mover reads
// it, args undecoded.
type QueuedJob struct {
	ID        int64
	Args      []byte
	Attempt   int
	CreatedAt time.Time
	Metadata  []byte
}

// ListQueued lists, by id, up to limit jobs of kind in queue that are
// available or scheduled and whose metadata key is not value (MarkQueued).
func ListQueued(ctx context.Context, db DBTX, schema, queue, kind, key, value string, limit int) ([]QueuedJob, error) {
	rows, err := db.Query(ctx, `SELECT id, args, attempt, created_at, metadata FROM `+Job(schema)+`
		WHERE queue = $1 AND kind = $2 AND state IN ('available', 'scheduled')
		  AND coalesce(metadata->>$5::text, '') <> $3
		ORDER BY id LIMIT $4`, queue, kind, value, limit, key)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueuedJob, error) {
		var q QueuedJob
		err := r.Scan(&q.ID, &q.Args, &q.Attempt, &q.CreatedAt, &q.Metadata)
		return q, err
	})
}

// EndedJob is a job that ended without an outcome (RecentlyEnded,
// StuckRecords): its record and how its latest job ended.
type EndedJob struct {
	// Batch, RecordID, Pipeline and Record name the record; from
	// RecentlyEnded, Args holds them undecoded instead.
	Batch, RecordID, Pipeline string
	Record                    []byte
	Args                      []byte
	// JobID, State, Attempt and LastError describe the record's latest
	// job; State "" when it has none (deleted).
	JobID     int64
	State     string
	Attempt   int
	LastError string
}

// RecentlyEnded lists up to limit jobs of kind discarded or cancelled within
// window (River's state-and-finalized_at index) whose record (args' batch
// and record_id) has neither a result (triage_result) nor a dead letter
// (triage_dead_letter) live or naming the job.
func RecentlyEnded(ctx context.Context, db DBTX, schema, kind string, window time.Duration, limit int) ([]EndedJob, error) {
	rows, err := db.Query(ctx, `SELECT j.id, j.args, j.state::text, j.attempt,
			coalesce(j.errors[array_length(j.errors, 1)]->>'error', '')
		FROM `+Job(schema)+` j
		WHERE j.state IN ('discarded', 'cancelled') AND j.finalized_at > now() - make_interval(secs => $2)
		  AND j.kind = $1
		  AND NOT EXISTS (SELECT 1 FROM triage_result t
			WHERE t.batch = j.args->>'batch' AND t.record_id = j.args->>'record_id')
		  AND NOT EXISTS (SELECT 1 FROM triage_dead_letter d
			WHERE d.batch = j.args->>'batch' AND d.record_id = j.args->>'record_id'
			  AND (d.requeued_at IS NULL OR d.job_id = j.id))
		LIMIT $3`, kind, window.Seconds(), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (EndedJob, error) {
		var e EndedJob
		err := r.Scan(&e.JobID, &e.Args, &e.State, &e.Attempt, &e.LastError)
		return e, err
	})
}

// StuckRecords lists up to limit records that ended nowhere, of batches
// that cannot settle by themselves: unsettled (triage_batch's total above
// its results and live dead letters), created within maxAge, with no call
// started for quiet (triage_attempt), and with no job of kind left to run.
// Each comes with its latest job, if any, to say how it ended. The job
// checks use River's GIN index on args: an unsettled batch that still has
// live jobs costs one probe.
func StuckRecords(ctx context.Context, db DBTX, schema, kind string, maxAge, quiet time.Duration, limit int) ([]EndedJob, error) {
	job := Job(schema)
	// Each step is MATERIALIZED so that it runs in this order and an empty
	// step ends the query: the counts first (for a settled batch two
	// index-only counts are cheaper than asking River's args index for every
	// job the batch ever had), then one args-index probe per unsettled
	// batch, then the records of stuck batches only. No ORDER BY before the
	// LIMIT: it would make the planner walk every record in line order.
	rows, err := db.Query(ctx, `WITH unsettled AS MATERIALIZED (
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
		ORDER BY o.batch, o.line`, kind, maxAge.Seconds(), limit, quiet.Seconds())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (EndedJob, error) {
		var e EndedJob
		err := r.Scan(&e.Batch, &e.RecordID, &e.Pipeline, &e.Record, &e.JobID, &e.State, &e.Attempt, &e.LastError)
		return e, err
	})
}
