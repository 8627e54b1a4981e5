package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrBudgetReached is wrapped by ReserveAttempt's *BudgetError.
var ErrBudgetReached = errors.New("ledger: batch budget reached")

// BudgetError says a call was not reserved because its batch's spend cap
// would be passed.
type BudgetError struct {
	Batch     string
	BudgetUSD float64
	// SpentUSD is what the cap counts as spent: billed spend plus
	// PossiblyBilledUSD.
	SpentUSD float64
	// PossiblyBilledUSD is the estimated cost of sends that settled without
	// a known cost: possibly billed attempts, and intents older than
	// Intent.InFlightFor (their run died mid-call). They never settle by
	// themselves, so they count as spent, not as in flight.
	PossiblyBilledUSD float64
	// ReservedUSD is the estimated cost of calls really in flight: intents
	// younger than Intent.InFlightFor.
	ReservedUSD float64
	// Paused is true for the one caller whose reservation moved the batch to
	// paused_budget (so exactly one caller in the fleet raises the alert).
	Paused bool
	// Wait is true when the call would fit the cap once calls in flight
	// settle (their reservations are worst cases, most of which are not
	// spent): the batch is not paused, the caller should try again shortly.
	Wait bool
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("ledger: batch %q budget $%.4f reached (spent $%.4f of which possibly billed $%.4f, in flight $%.4f)",
		e.Batch, e.BudgetUSD, e.SpentUSD, e.PossiblyBilledUSD, e.ReservedUSD)
}

func (e *BudgetError) Unwrap() error { return ErrBudgetReached }

// HeldError says a call was not reserved because its batch was paused or
// cancelled by hand (State BatchPaused or BatchCancelled).
type HeldError struct {
	Batch string
	State BatchState
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("ledger: batch %q is %s: no call", e.Batch, e.State)
}

// ReserveAttempt is BeginAttempt under the batch's spend cap: the intent row
// carries the call's estimated cost (its reservation), and it is written only
// if spent plus every live reservation plus this one stays within the
// batch's budget_usd. Spent is billed spend plus the estimates of sends that
// settled without a known cost (possibly billed, or intents older than
// in.InFlightFor); live reservations are the younger intents. The batch row
// is locked for the one statement, so concurrent workers cannot together
// pass the cap by more than the calls already in flight. A batch in
// paused_budget reserves nothing. A batch-mode intent whose line is still
// open is live whatever its age and whatever in.InFlightFor says (the
// caller may be a synchronous call of an auto batch): it waits in, or for,
// a provider batch, and an expired line goes into the next one with the same
// attempt. When the call would pass the cap even with
// nothing in flight, the batch moves to paused_budget and a *BudgetError is
// returned; when it only lacks room because of calls in flight, the
// *BudgetError says Wait and nothing is paused. Because stuck estimates count
// as spent, a capped batch always ends in one or the other: it cannot wait
// forever on calls that will never settle.
//
// A batch paused or cancelled by hand reserves nothing (*HeldError). The
// statement holds a share lock on the batch row, so an intent is either
// committed before a pause or cancel changes the batch's state (the call is
// in flight) or refused after it: no call starts after the change commits.
func ReserveAttempt(ctx context.Context, db DBTX, in Intent) (int64, error) {
	// Most batches have no cap: one statement, no lock.
	var id int64
	err := db.QueryRow(ctx, `WITH b AS (
			SELECT 1 FROM triage_batch WHERE id = $1 AND budget_usd IS NULL AND state IN ('running', 'paused_exhausted')
			FOR SHARE
		), resent AS (`+resentSQL+` AND EXISTS (SELECT 1 FROM b))
		INSERT INTO triage_attempt
			(batch, record_id, job_id, attempt, key, model, idempotency_key, request_hash, is_retry, est_cost_usd, started_at, change, mode)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, coalesce($11, now()), $12, $13
		FROM b
		RETURNING id`,
		in.Batch, in.RecordID, in.JobID, in.Attempt, in.Key, in.Model, in.IdempotencyKey, in.RequestHash,
		in.IsRetry, usdArg(in.EstCostUSD), nowArg(in.Now), in.Change, modeArg(in.Mode)).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("ledger: reserve attempt %s/%s: %w", in.Batch, in.RecordID, err)
	}
	return reserveCapped(ctx, db, in)
}

// reserveCapped is ReserveAttempt for a batch with a cap (or paused). The
// batch row lock is taken by its own statement: under READ COMMITTED the
// next statement's snapshot then sees every reservation committed by the
// transactions that held the lock before, which a single statement (whose
// snapshot predates its lock wait) would not.
func reserveCapped(ctx context.Context, db DBTX, in Intent) (int64, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("ledger: reserve attempt: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	var (
		budget *float64
		spent  float64
		state  BatchState
	)
	err = tx.QueryRow(ctx, `SELECT budget_usd::float8, spent_usd::float8, state FROM triage_batch WHERE id = $1 FOR UPDATE`, in.Batch).
		Scan(&budget, &spent, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("ledger: reserve attempt: batch %q: %w", in.Batch, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: reserve attempt: %w", err)
	}
	if state == BatchPaused || state == BatchCancelled {
		return 0, &HeldError{Batch: in.Batch, State: state}
	}
	be := &BudgetError{Batch: in.Batch, SpentUSD: spent}
	if budget != nil {
		be.BudgetUSD = *budget
	}
	if state == BatchPausedBudget {
		return 0, be
	}
	if budget != nil {
		inFlight := in.InFlightFor
		if inFlight <= 0 {
			inFlight = InFlightForDefault
		}
		var billed float64
		if err := tx.QueryRow(ctx, `SELECT
				coalesce((SELECT sum(cost_usd) FROM triage_spend_delta WHERE batch = $1), 0)::float8,
				coalesce(sum(est_cost_usd) FILTER (WHERE a.live), 0)::float8,
				coalesce(sum(est_cost_usd) FILTER (WHERE NOT a.live), 0)::float8
			FROM (SELECT est_cost_usd,
					status = 'intent' AND (started_at > coalesce($2, now()) - make_interval(secs => $3)
						OR (mode = '`+ModeBatch+`' AND EXISTS (SELECT 1 FROM triage_provider_batch_line l
							WHERE l.job_id = t.job_id AND l.state <> '`+LineApplied+`' AND l.attempt_id = t.id))) AS live
				FROM triage_attempt t
				WHERE batch = $1 AND status IN ('intent', 'possibly_billed')) a`,
			in.Batch, nowArg(in.Now), inFlight.Seconds()).Scan(&billed, &be.ReservedUSD, &be.PossiblyBilledUSD); err != nil {
			return 0, fmt.Errorf("ledger: reserve attempt: reservations: %w", err)
		}
		be.SpentUSD = spent + billed + be.PossiblyBilledUSD
		const eps = 1e-12
		if be.SpentUSD+in.EstCostUSD > *budget+eps {
			if _, err := tx.Exec(ctx, `UPDATE triage_batch SET state = 'paused_budget' WHERE id = $1`, in.Batch); err != nil {
				return 0, fmt.Errorf("ledger: pause batch %q: %w", in.Batch, err)
			}
			if err := tx.Commit(ctx); err != nil {
				return 0, fmt.Errorf("ledger: pause batch %q: %w", in.Batch, err)
			}
			be.Paused = true
			return 0, be
		}
		if be.SpentUSD+be.ReservedUSD+in.EstCostUSD > *budget+eps {
			// Room once the calls in flight settle: wait, do not pause.
			be.Wait = true
			return 0, be
		}
	}
	id, err := BeginAttempt(ctx, tx, in)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("ledger: reserve attempt: %w", err)
	}
	return id, nil
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
	// FirstCalls are attempts that were a record's first call. Answers
	// from the response cache (reason cache_hit) are not calls: counting
	// them would let a half-cached batch retry into a failing provider.
	FirstCalls int
	// OpenRetries are retries that have not succeeded: in flight, failed or
	// possibly billed. A retry that succeeded no longer counts, so once a
	// provider recovers the tail of a batch drains at full speed instead of
	// at the budget's floor (Envoy's retry budget likewise counts only
	// active retries).
	OpenRetries int
}

// RetryUsageByKey counts a key's first calls and open retries started at or
// after since. Only synchronous calls count: the budget stops retries from
// hammering a failing endpoint, and a provider batch's line is neither
// such a call nor such a retry (its intent waits for hours in a batch, and
// counted as an open retry it would starve an auto pipeline's synchronous
// retries near the deadline).
func RetryUsageByKey(ctx context.Context, db DBTX, key string, since time.Time) (RetryUsage, error) {
	var u RetryUsage
	err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT is_retry AND reason IS DISTINCT FROM '`+ReasonCacheHit+`'),
			count(*) FILTER (WHERE is_retry AND status IN ('intent', 'failed', 'possibly_billed'))
		FROM triage_attempt WHERE key = $1 AND started_at >= $2 AND mode = '`+ModeSync+`'`, key, since).Scan(&u.FirstCalls, &u.OpenRetries)
	if err != nil {
		return RetryUsage{}, fmt.Errorf("ledger: retry usage of key %q: %w", key, err)
	}
	return u, nil
}
