package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrBudgetReached is wrapped by ReserveAttempt's *BudgetError.
var ErrBudgetReached = errors.New("ledger: batch budget reached")

// BudgetError says a call was not reserved because its batch's spend cap
// would be passed.
type BudgetError struct {
	Batch     string
	BudgetUSD float64
	// SpentUSD is billed spend; ReservedUSD the estimated cost of calls in
	// flight or possibly billed.
	SpentUSD, ReservedUSD float64
	// Paused is true for the one caller whose reservation moved the batch to
	// paused_budget (so exactly one caller in the fleet raises the alert).
	Paused bool
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("ledger: batch %q budget $%.4f reached (spent $%.4f, in flight $%.4f)", e.Batch, e.BudgetUSD, e.SpentUSD, e.ReservedUSD)
}

func (e *BudgetError) Unwrap() error { return ErrBudgetReached }

// ReserveAttempt is BeginAttempt under the batch's spend cap: the intent row
// carries the call's estimated cost (its reservation), and it is written only
// if billed spend plus every open reservation plus this one stays within the
// batch's budget_usd. The batch row is locked for the one statement, so
// concurrent workers cannot together pass the cap by more than the calls
// already in flight. A batch in paused_budget reserves nothing. When the cap
// would be passed, the batch moves to paused_budget and a *BudgetError is
// returned.
func ReserveAttempt(ctx context.Context, db DBTX, in Intent) (int64, error) {
	var (
		id                      *int64
		found, paused           bool
		budget, spent, reserved *float64
	)
	err := db.QueryRow(ctx, `WITH b AS (
		SELECT id, budget_usd, spent_usd, state FROM triage_batch WHERE id = $1 FOR UPDATE
	), r AS (
		SELECT CASE WHEN b.budget_usd IS NULL THEN 0 ELSE (
			SELECT coalesce(sum(est_cost_usd), 0) FROM triage_attempt
			WHERE batch = $1 AND status IN ('intent', 'possibly_billed')) END AS reserved
		FROM b
	), ok AS (
		SELECT b.state <> 'paused_budget'
		       AND (b.budget_usd IS NULL OR b.spent_usd + r.reserved + $10 <= b.budget_usd) AS ok
		FROM b, r
	), ins AS (
		INSERT INTO triage_attempt
			(batch, record_id, job_id, attempt, key, model, idempotency_key, request_hash, is_retry, est_cost_usd, started_at)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, coalesce($11, now()) FROM ok WHERE ok.ok
		RETURNING id
	), pause AS (
		UPDATE triage_batch t SET state = 'paused_budget' FROM ok
		WHERE t.id = $1 AND NOT ok.ok AND t.state <> 'paused_budget'
		RETURNING t.id
	)
	SELECT (SELECT id FROM ins), EXISTS (SELECT 1 FROM b), EXISTS (SELECT 1 FROM pause),
	       (SELECT budget_usd::float8 FROM b), (SELECT spent_usd::float8 FROM b), (SELECT reserved::float8 FROM r)`,
		in.Batch, in.RecordID, in.JobID, in.Attempt, in.Key, in.Model, in.IdempotencyKey, in.RequestHash,
		in.IsRetry, in.EstCostUSD, nowArg(in.Now)).Scan(&id, &found, &paused, &budget, &spent, &reserved)
	if err != nil {
		return 0, fmt.Errorf("ledger: reserve attempt %s/%s: %w", in.Batch, in.RecordID, err)
	}
	if !found {
		return 0, fmt.Errorf("ledger: reserve attempt: batch %q: %w", in.Batch, ErrNotFound)
	}
	if id != nil {
		return *id, nil
	}
	be := &BudgetError{Batch: in.Batch, Paused: paused}
	if budget != nil {
		be.BudgetUSD = *budget
	}
	if spent != nil {
		be.SpentUSD = *spent
	}
	if reserved != nil {
		be.ReservedUSD = *reserved
	}
	return 0, be
}

// ClaimOnce records that the alert kind fired for key and reports whether
// this call was the first, fleet-wide. Callers alert only when it is.
func ClaimOnce(ctx context.Context, db DBTX, key, kind string) (bool, error) {
	tag, err := db.Exec(ctx, `INSERT INTO triage_alert_once (key, kind) VALUES ($1, $2) ON CONFLICT DO NOTHING`, key, kind)
	if err != nil {
		return false, fmt.Errorf("ledger: claim alert %s/%s: %w", key, kind, err)
	}
	return tag.RowsAffected() == 1, nil
}

// RetryUsage is what the fleet retry budget reads for a key over a window.
type RetryUsage struct {
	// FirstCalls are attempts that were a record's first call.
	FirstCalls int
	// OpenRetries are retries that have not succeeded: in flight, failed or
	// possibly billed. A retry that succeeded no longer counts, so once a
	// provider recovers the tail of a batch drains at full speed instead of
	// at the budget's floor (Envoy's retry budget likewise counts only
	// active retries).
	OpenRetries int
}

// RetryUsageByKey counts a key's first calls and open retries started at or
// after since.
func RetryUsageByKey(ctx context.Context, db DBTX, key string, since time.Time) (RetryUsage, error) {
	var u RetryUsage
	err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT is_retry),
			count(*) FILTER (WHERE is_retry AND status IN ('intent', 'failed', 'possibly_billed'))
		FROM triage_attempt WHERE key = $1 AND started_at >= $2`, key, since).Scan(&u.FirstCalls, &u.OpenRetries)
	if err != nil {
		return RetryUsage{}, fmt.Errorf("ledger: retry usage of key %q: %w", key, err)
	}
	return u, nil
}
