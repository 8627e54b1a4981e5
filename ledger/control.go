package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/triage-dev/triage/classify"
)

// The ledger's side of the batch controls by hand (`triage batch pause |
// resume | cancel | delete`); worker/operator runs each in one transaction
// with River's side.

// heldSQL is true for a triage_batch row aliased b that is paused or
// cancelled by hand: its jobs make no call and its pending batch lines are
// not sent.
const heldSQL = `b.state IN ('paused', 'cancelled')`

// lineHeldSQL is true for a provider-batch line aliased l whose batch is
// paused or cancelled by hand: the submitter leaves it out of new provider
// batches.
const lineHeldSQL = `EXISTS (SELECT 1 FROM triage_batch b WHERE b.id = l.batch AND ` + heldSQL + `)`

// BatchLock is a batch's stored state and progress, read with its row
// locked for a control by hand.
type BatchLock struct {
	Batch
	// Done counts the records with a result or a live dead letter.
	Done int
}

// Settled reports whether every record has ended.
func (l BatchLock) Settled() bool { return l.Done >= l.Total }

// LockBatch reads a batch with its row locked FOR UPDATE (call it in a
// transaction): concurrent controls of one batch run one after the other,
// and an intent being reserved (ReserveAttempt) either commits before or
// sees the new state. ErrNotFound.
func LockBatch(ctx context.Context, tx pgx.Tx, id string) (BatchLock, error) {
	var l BatchLock
	err := tx.QueryRow(ctx, `SELECT `+batchColumns+`,
			(SELECT count(*) FROM triage_result r WHERE r.batch = b.id)
			+ (SELECT count(*) FROM triage_dead_letter d WHERE d.batch = b.id AND d.requeued_at IS NULL)
		FROM triage_batch b WHERE b.id = $1 FOR UPDATE OF b`, id).
		Scan(&l.ID, &l.Pipeline, &l.Key, &l.Total, &l.BudgetUSD, &l.SpentUSD, &l.State, &l.CreatedAt, &l.Deadline, &l.Done)
	if errors.Is(err, pgx.ErrNoRows) {
		return BatchLock{}, fmt.Errorf("ledger: batch %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return BatchLock{}, fmt.Errorf("ledger: lock batch %q: %w", id, err)
	}
	return l, nil
}

// TakeBackBatchLines closes every line of batch that is not in a live
// provider batch (pending, or not run), finishing its attempt as not run
// ($0, as TakeBackBatchLine), and returns the jobs of the lines closed.
// Lines in a provider batch (submitted) or answered are left: their answer
// is on its way or in, and is applied (and billed) by their job.
func TakeBackBatchLines(ctx context.Context, db DBTX, batch string) ([]int64, error) {
	rows, err := db.Query(ctx, `WITH taken AS (
			UPDATE triage_provider_batch_line l SET state = 'applied'
			WHERE l.batch = $1 AND l.state IN ('pending', 'not_run')
			RETURNING l.job_id, l.attempt_id
		), fin AS (
			UPDATE triage_attempt a SET status = 'failed', class = $3, reason = $2, cost_usd = 0, finished_at = now()
			FROM taken WHERE a.id = taken.attempt_id AND a.status = 'intent'
		)
		SELECT job_id FROM taken`, batch, ReasonBatchNotRun, classify.Throttled.String())
	if err != nil {
		return nil, fmt.Errorf("ledger: take back the lines of batch %q: %w", batch, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("ledger: take back the lines of batch %q: %w", batch, err)
	}
	return ids, nil
}

// CancelledRecord is a record whose queued job a cancel took off the queue.
type CancelledRecord struct {
	RecordID string
	JobID    int64
	Pipeline string
	Attempts int
	Record   json.RawMessage
}

// AddCancelledDeadLetters writes one dead letter (class rejected, reason
// ReasonCancelled) per record in one statement, skipping records that have
// a result or a live dead letter already, and returns how many it wrote.
// The lost answers of the records it dead-letters are resolved
// dead_lettered.
func AddCancelledDeadLetters(ctx context.Context, db DBTX, batch, key, detail string, recs []CancelledRecord) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	ids := make([]string, len(recs))
	jobs := make([]int64, len(recs))
	pipelines := make([]string, len(recs))
	attempts := make([]int32, len(recs))
	data := make([]string, len(recs))
	for i, r := range recs {
		ids[i], jobs[i], pipelines[i], attempts[i] = r.RecordID, r.JobID, r.Pipeline, int32(r.Attempts)
		data[i] = string(r.Record)
		if len(r.Record) == 0 {
			data[i] = "null"
		}
	}
	// The lost answers of the records dead-lettered here will not be sent
	// again: resolved dead_lettered, as AddDeadLetter resolves them.
	var n int
	err := db.QueryRow(ctx, `WITH ins AS (
		INSERT INTO triage_dead_letter
			(batch, record_id, job_id, pipeline, key, class, reason, attempts, request, error_excerpt, rule, unknown)
		SELECT $1, r.record_id, r.job_id, r.pipeline, $2, $3, $4, r.attempts, r.data::jsonb, $5, '', false
		FROM unnest($6::text[], $7::bigint[], $8::text[], $9::int[], $10::text[]) AS r(record_id, job_id, pipeline, attempts, data)
		WHERE NOT EXISTS (SELECT 1 FROM triage_result t WHERE t.batch = $1 AND t.record_id = r.record_id)
		ON CONFLICT (batch, record_id) WHERE requeued_at IS NULL DO NOTHING
		RETURNING record_id
	), lost AS (
		UPDATE triage_attempt SET resolution = 'dead_lettered'
		WHERE batch = $1 AND record_id IN (SELECT record_id FROM ins) AND `+lostSQL+`
			AND (resolution IS NULL OR resolution = 'unknown')
	)
	SELECT count(*) FROM ins`,
		batch, key, classify.Rejected.String(), ReasonCancelled, Redact(detail), ids, jobs, pipelines, attempts, data).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("ledger: dead-letter the cancelled records of batch %q: %w", batch, err)
	}
	return n, nil
}

// DeleteBatch removes a batch and everything the ledger holds for it: its
// records, results, dead letters, attempts and provider-batch lines. The
// keys' spend counters keep what the batch cost. Call it in a transaction
// after LockBatch. ErrNotFound.
func DeleteBatch(ctx context.Context, tx pgx.Tx, id string) error {
	for _, q := range []string{
		`DELETE FROM triage_provider_batch_line WHERE batch = $1`,
		`DELETE FROM triage_result WHERE batch = $1`,
		`DELETE FROM triage_dead_letter WHERE batch = $1`,
		`DELETE FROM triage_attempt WHERE batch = $1`,
		`DELETE FROM triage_record WHERE batch = $1`,
	} {
		if _, err := tx.Exec(ctx, q, id); err != nil {
			return fmt.Errorf("ledger: delete batch %q: %w", id, err)
		}
	}
	tag, err := tx.Exec(ctx, `DELETE FROM triage_batch WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("ledger: delete batch %q: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("ledger: batch %q: %w", id, ErrNotFound)
	}
	return nil
}

// QueueBatchHold queues, on b, the read of batch's state as stored when it
// is paused or cancelled by hand (BatchPaused, BatchCancelled); dst is left
// "" otherwise, or when there is no such batch. The worker reads it in the
// round trip that asks the key's breakers, before every call.
func QueueBatchHold(b *pgx.Batch, dst *BatchState, batch string) {
	b.Queue(`SELECT coalesce((SELECT b.state FROM triage_batch b WHERE b.id = $1 AND `+heldSQL+`), '')`, batch).
		QueryRow(func(row pgx.Row) error {
			var s string
			if err := row.Scan(&s); err != nil {
				return fmt.Errorf("ledger: batch %q hold: %w", batch, err)
			}
			*dst = BatchState(s)
			return nil
		})
}

// UncancelBatch sets a cancelled batch running again, for a requeue of its
// dead letters: the requeued records are wanted after all. Other states are
// left as they are.
func UncancelBatch(ctx context.Context, db DBTX, id string) error {
	if _, err := db.Exec(ctx, `UPDATE triage_batch SET state = 'running' WHERE id = $1 AND state = 'cancelled'`, id); err != nil {
		return fmt.Errorf("ledger: uncancel batch %q: %w", id, err)
	}
	return nil
}
