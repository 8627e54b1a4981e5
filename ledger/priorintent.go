package ledger

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// PriorIntent is QueuePriorOutcomeAndIntent's answer: what earlier
// attempts under the idempotency key came to and, when the request is a
// first send nothing stands in the way of, the intent row written for it.
type PriorIntent struct {
	// Prior is PriorOutcomeForJob's answer, as of before the intent.
	Prior Prior
	// AttemptID is the intent written; 0 when none was: the key has an
	// attempt already (a retry, a crash, an answer), the record has a dead
	// letter in force, or the batch has a spend cap or is held (then
	// ReserveAttempt decides, after the caller's decision).
	AttemptID int64
}

// QueuePriorOutcomeAndIntent queues on b, in one statement, the prior
// outcome of in's idempotency key for its job (QueuePriorOutcomeForJob)
// and, for a first send, its intent row (ReserveAttempt's uncapped path):
// written only when the key has no attempt in any status, the record has no
// dead letter in force, and the batch has no cap and is running (or paused
// for an exhausted key, as ReserveAttempt allows). It is meant for the
// round trip before a call, next to the breakers' admission, so that a
// first send costs one round trip before the call instead of two.
//
// The intent is written before the caller has decided to call: when the
// decision is anything but a call (the admission refuses, the key is
// paused, the cache answers, a deadline or the retry budget says no), the
// caller must WithdrawIntent it before anything else. A process that dies
// in between leaves an intent row that was never sent, which the next
// attempt counts as possibly billed, exactly as for a process that dies
// between a committed intent and the request today.
//
// dst is filled when the batch's results are read; an error is returned
// from the batch's Close.
func QueuePriorOutcomeAndIntent(b *pgx.Batch, dst *PriorIntent, in Intent) {
	b.Queue(priorIntentSQL, priorIntentArgs(in)...).QueryRow(func(row pgx.Row) error {
		pi, err := scanPriorIntent(row, in)
		if err == nil {
			*dst = pi
		}
		return err
	})
}

func priorIntentArgs(in Intent) []any {
	return []any{in.IdempotencyKey, in.JobID, in.Batch, in.RecordID, ReasonWorkerStopped,
		in.Attempt, in.Key, in.Model, in.RequestHash, in.IsRetry, usdArg(in.EstCostUSD), nowArg(in.Now), in.Change, modeArg(in.Mode)}
}

func scanPriorIntent(row pgx.Row, in Intent) (PriorIntent, error) {
	var (
		pi   PriorIntent
		last *string
	)
	err := row.Scan(append(priorDest(&pi.Prior, &last), &pi.AttemptID)...)
	if err == nil {
		err = pi.Prior.setLast(last)
	}
	if err != nil {
		return PriorIntent{}, fmt.Errorf("ledger: prior outcome and intent %s/%s: %w", in.Batch, in.RecordID, err)
	}
	return pi, nil
}

// PriorOutcomeAndIntent is QueuePriorOutcomeAndIntent on its own.
func PriorOutcomeAndIntent(ctx context.Context, db DBTX, in Intent) (PriorIntent, error) {
	return scanPriorIntent(db.QueryRow(ctx, priorIntentSQL, priorIntentArgs(in)...), in)
}

// priorIntentSQL is priorSQL ($1–$5) and ReserveAttempt's uncapped insert
// ($3, $4, $2 and $6–$14), the insert conditioned on the prior read in the
// same snapshot. The batch row is share-locked as ReserveAttempt does, so
// a pause or cancel by hand either commits after the intent (the call is
// in flight) or is seen and no intent is written.
const priorIntentSQL = `WITH p (attempts, ok_id, ambiguous, job_ambiguous, job_last, billed, possibly_billed,
		result_stored, job_calls, dead_lettered, pending_response) AS (` + priorSQL + `
	), ins AS (
		INSERT INTO triage_attempt
			(batch, record_id, job_id, attempt, key, model, idempotency_key, request_hash, is_retry, est_cost_usd, started_at, change, mode)
		SELECT $3, $4, $2, $6, $7, $8, $1, $9, $10, $11, coalesce($12, now()), $13, $14
		FROM p, (SELECT 1 FROM triage_batch WHERE id = $3 AND budget_usd IS NULL AND state IN ('running', 'paused_exhausted')
			FOR SHARE) b
		WHERE p.attempts = 0 AND NOT p.dead_lettered
		RETURNING id
	)
	SELECT p.*, coalesce((SELECT id FROM ins), 0) FROM p`

// WithdrawIntent deletes an intent row that was never sent: the one
// QueuePriorOutcomeAndIntent wrote for a call the caller then decided not
// to make. Only an intent no provider-batch line refers to is deleted; an
// attempt finished (or resolved) meanwhile is ErrAttemptFinished, an
// unknown id ErrNotFound.
func WithdrawIntent(ctx context.Context, db DBTX, attemptID int64) error {
	var status string
	err := db.QueryRow(ctx, `WITH gone AS (
			DELETE FROM triage_attempt a WHERE a.id = $1 AND a.status = 'intent'
			  AND NOT EXISTS (SELECT 1 FROM triage_provider_batch_line l WHERE l.attempt_id = a.id)
			RETURNING a.id
		)
		SELECT CASE WHEN EXISTS (SELECT 1 FROM gone) THEN 'withdrawn' ELSE coalesce((SELECT status FROM triage_attempt WHERE id = $1), '') END`,
		attemptID).Scan(&status)
	switch {
	case err != nil:
		return fmt.Errorf("ledger: withdraw intent %d: %w", attemptID, err)
	case status == "withdrawn":
		return nil
	case status == "":
		return fmt.Errorf("ledger: withdraw intent %d: %w", attemptID, ErrNotFound)
	case status == string(AttemptIntent):
		return fmt.Errorf("ledger: withdraw intent %d: a provider-batch line refers to it", attemptID)
	default:
		return fmt.Errorf("ledger: withdraw intent %d (%s): %w", attemptID, status, ErrAttemptFinished)
	}
}
