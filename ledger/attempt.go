package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// nowArg maps the zero time to NULL, so SQL's coalesce($n, now()) uses the
// database clock unless a test pins it.
func nowArg(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// nullString and nullInt map "" and 0 to NULL.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullInt(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// usdArg is a dollar amount for a numeric parameter, as the decimal text
// pgx itself would parse it to (its shortest round-trip spelling): sent as
// text, PostgreSQL parses it to the same numeric, without pgx's binary
// numeric encoding (a big.Int parse and division loop, the costliest
// parameter of a job's statements). NaN and the infinities, which no
// amount is, are passed as they are.
func usdArg(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return f
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// nullUSDArg is usdArg for an amount that may be NULL.
func nullUSDArg(f *float64) any {
	if f == nil {
		return nil
	}
	return usdArg(*f)
}

// BeginAttempt writes the intent row for a call and returns its id. Call it
// before the request is sent, and commit it (do not hold it in a transaction
// across the call): if the process dies mid-call, the intent row is what
// tells the next attempt that the provider may have billed. A retry
// (Intent.IsRetry) marks the earlier lost answers under its idempotency key
// ResolutionResent: the call is sent again.
func BeginAttempt(ctx context.Context, db DBTX, in Intent) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, `WITH resent AS (`+resentSQL+`)
	INSERT INTO triage_attempt
		(batch, record_id, job_id, attempt, key, model, idempotency_key, request_hash, is_retry, est_cost_usd, started_at, change, mode)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, coalesce($11, now()), $12, $13)
		RETURNING id`,
		in.Batch, in.RecordID, in.JobID, in.Attempt, in.Key, in.Model, in.IdempotencyKey, in.RequestHash,
		in.IsRetry, usdArg(in.EstCostUSD), nowArg(in.Now), in.Change, modeArg(in.Mode)).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("ledger: begin attempt %s/%s: %w", in.Batch, in.RecordID, err)
	}
	return id, nil
}

// FinishAttempt records an attempt's outcome and appends its cost to the
// spend counters (triage_spend_delta, see FoldSpend), in one statement. It
// touches no row but the attempt's own, so completions of one batch inside
// their transactions never wait for each other. Status must be AttemptOK, AttemptFailed or
// AttemptPossiblyBilled. Only an intent can be finished: an attempt finished
// before, or resolved meanwhile by a later attempt, is ErrAttemptFinished;
// an unknown id is ErrNotFound.
func FinishAttempt(ctx context.Context, db DBTX, attemptID int64, out Outcome) error {
	if err := checkOutcome(attemptID, out); err != nil {
		return err
	}
	return scanFinish(db.QueryRow(ctx, finishSQL+`
	SELECT EXISTS (SELECT 1 FROM upd), prev.status FROM prev`, finishArgs(attemptID, out)...), attemptID)
}

func checkOutcome(attemptID int64, out Outcome) error {
	switch out.Status {
	case AttemptOK, AttemptFailed, AttemptPossiblyBilled:
		return nil
	}
	return fmt.Errorf("ledger: finish attempt %d: status %q is not an outcome", attemptID, out.Status)
}

// finishSQL is the common table expressions of FinishAttempt ($1–$13):
// prev, the attempt as it was; upd, the attempt finished if it was an
// intent; spend, its cost as a spend delta. The caller adds what else the
// statement does and its SELECT (EXISTS upd, prev.status: scanFinish).
const finishSQL = `WITH prev AS (
		SELECT id, status FROM triage_attempt WHERE id = $1
	), upd AS (
		UPDATE triage_attempt SET
			status = $2, class = $3, http_status = $4, vendor_code = $5, reason = $6,
			input_tokens = $7, output_tokens = $8, cost_usd = $9,
			finished_at = coalesce($10, now()),
			resolution = CASE WHEN $2 = 'possibly_billed' THEN coalesce(resolution, 'unknown') END,
			partial_text = $11, est_cost_usd = coalesce($12, est_cost_usd),
			sync_cost_usd = coalesce($13, sync_cost_usd)
		WHERE id = $1 AND status = 'intent'
		RETURNING batch, key, cost_usd
	), spend AS (
		INSERT INTO triage_spend_delta (batch, key, cost_usd)
		SELECT batch, key, cost_usd FROM upd WHERE cost_usd <> 0
	)`

func finishArgs(attemptID int64, out Outcome) []any {
	return []any{attemptID, string(out.Status), out.Class.String(), nullInt(out.HTTPStatus), nullString(out.VendorCode),
		nullString(out.Reason), out.InputTokens, out.OutputTokens, usdArg(out.CostUSD), nowArg(out.Now),
		out.Partial.text(), out.Partial.rest(), nullUSDArg(out.SyncCostUSD)}
}

// scanFinish reads finishSQL's answer: ErrNotFound for an unknown
// attempt, ErrAttemptFinished for one that was not an intent.
func scanFinish(row pgx.Row, attemptID int64) error {
	var (
		updated bool
		status  AttemptStatus
	)
	err := row.Scan(&updated, &status)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("ledger: finish attempt %d: %w", attemptID, ErrNotFound)
	case err != nil:
		return fmt.Errorf("ledger: finish attempt %d: %w", attemptID, err)
	case !updated:
		// status is as of this statement's snapshot; a concurrent finish
		// may show it still as intent.
		return fmt.Errorf("ledger: finish attempt %d (was %s): %w", attemptID, status, ErrAttemptFinished)
	}
	return nil
}

// PriorOutcome reads what earlier attempts under an idempotency key came to.
// Call it before a retry's BeginAttempt: then every intent row it sees is
// one whose worker died mid-call, counted as ambiguous with possibly_billed.
// An unknown key is the zero Prior, not an error.
func PriorOutcome(ctx context.Context, db DBTX, idempotencyKey string) (Prior, error) {
	return PriorOutcomeForJob(ctx, db, idempotencyKey, 0, "", "")
}

// PriorOutcomeForJob is PriorOutcome that also answers for one job of one
// record: JobAmbiguous, JobLast, JobCalls and DeadLettered.
func PriorOutcomeForJob(ctx context.Context, db DBTX, idempotencyKey string, jobID int64, batch, recordID string) (Prior, error) {
	var p Prior
	var last *string
	err := db.QueryRow(ctx, priorSQL, idempotencyKey, jobID, batch, recordID, ReasonWorkerStopped).Scan(priorDest(&p, &last)...)
	if err == nil {
		err = p.setLast(last)
	}
	if err != nil {
		return Prior{}, fmt.Errorf("ledger: prior outcome: %w", err)
	}
	return p, nil
}

// QueuePriorOutcomeForJob queues PriorOutcomeForJob's read on b, so that a
// caller sends it in the same round trip as its other reads before a call
// (the worker: with the breakers' admission). dst is filled when the batch's
// results are read; an error is returned from the batch's Close.
func QueuePriorOutcomeForJob(b *pgx.Batch, dst *Prior, idempotencyKey string, jobID int64, batch, recordID string) {
	b.Queue(priorSQL, idempotencyKey, jobID, batch, recordID, ReasonWorkerStopped).QueryRow(func(row pgx.Row) error {
		var p Prior
		var last *string
		err := row.Scan(priorDest(&p, &last)...)
		if err == nil {
			err = p.setLast(last)
		}
		if err != nil {
			return fmt.Errorf("ledger: prior outcome: %w", err)
		}
		*dst = p
		return nil
	})
}

const priorSQL = `SELECT
		count(*),
		coalesce(min(a.id) FILTER (WHERE a.status = 'ok'), 0),
		count(*) FILTER (WHERE a.status IN ('possibly_billed', 'intent')),
		count(*) FILTER (WHERE a.status IN ('possibly_billed', 'intent') AND a.job_id = $2),
		(array_agg(CASE WHEN a.status = 'intent' THEN 'intent' ELSE a.class END ORDER BY a.id DESC)
			FILTER (WHERE a.job_id = $2))[1],
		coalesce(sum(a.cost_usd), 0)::float8,
		coalesce(sum(a.est_cost_usd) FILTER (WHERE a.status IN ('possibly_billed', 'intent')), 0)::float8,
		coalesce(bool_or(r.attempt_id IS NOT NULL), false),
		count(*) FILTER (WHERE a.job_id = $2 AND (a.status = 'intent'
			OR a.class IN ('transient', 'ambiguous') AND a.reason IS DISTINCT FROM $5)),
		EXISTS (SELECT 1 FROM triage_dead_letter d
			WHERE d.batch = $3 AND d.record_id = $4 AND d.requeued_at IS NULL),
		coalesce(bool_or(a.response_id IS NOT NULL AND a.status IN ('possibly_billed', 'intent')), false)
	FROM triage_attempt a
	LEFT JOIN triage_result r ON r.attempt_id = a.id
	WHERE a.idempotency_key = $1`

func priorDest(p *Prior, last **string) []any {
	return []any{&p.Attempts, &p.OKAttemptID, &p.Ambiguous, &p.JobAmbiguous, last, &p.BilledUSD, &p.PossiblyBilledUSD,
		&p.ResultStored, &p.JobCalls, &p.DeadLettered, &p.PendingResponse}
}

// setLast maps the job's latest attempt ("intent" or its class) to JobLast.
func (p *Prior) setLast(last *string) error {
	if last == nil {
		return nil
	}
	p.JobLast.Seen = true
	if *last == string(AttemptIntent) {
		p.JobLast.Unfinished = true
		return nil
	}
	return p.JobLast.Class.UnmarshalText([]byte(*last))
}

// ResolvePossiblyBilled marks the possibly_billed and intent attempts under
// an idempotency key resolved, once an attempt with that key succeeded (the
// provider replayed the first call or billed once). It returns how many it
// resolved; the ok attempt itself is untouched. Call it with the attempt
// that succeeded finished, so no live intent is resolved.
func ResolvePossiblyBilled(ctx context.Context, db DBTX, idempotencyKey string) (int, error) {
	tag, err := db.Exec(ctx, `UPDATE triage_attempt SET status = 'resolved', finished_at = coalesce(finished_at, now())
		WHERE idempotency_key = $1 AND status IN ('possibly_billed', 'intent')`, idempotencyKey)
	if err != nil {
		return 0, fmt.Errorf("ledger: resolve possibly billed: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// ListAttempts returns attempts, newest first (`triage ledger`).
func ListAttempts(ctx context.Context, db DBTX, f AttemptFilter) ([]Attempt, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = AttemptLimitDefault
	}
	rows, err := db.Query(ctx, `SELECT id, batch, record_id, job_id, attempt, key, model, idempotency_key,
			request_hash, status, class, http_status, vendor_code, reason, input_tokens, output_tokens,
			cost_usd::float8, est_cost_usd::float8, partial_text, is_retry, started_at, finished_at, change, mode,
			coalesce(resolution, '')
		FROM triage_attempt
		WHERE ($1 = '' OR batch = $1) AND ($2 = '' OR key = $2) AND ($4 = '' OR record_id = $4)
		ORDER BY id DESC
		LIMIT $3`, f.Batch, f.Key, limit, f.RecordID)
	if err != nil {
		return nil, fmt.Errorf("ledger: list attempts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		err := r.Scan(&a.ID, &a.Batch, &a.RecordID, &a.JobID, &a.Attempt, &a.Key, &a.Model, &a.IdempotencyKey,
			&a.RequestHash, &a.Status, &a.Class, &a.HTTPStatus, &a.VendorCode, &a.Reason, &a.InputTokens,
			&a.OutputTokens, &a.CostUSD, &a.EstCostUSD, &a.PartialText, &a.IsRetry, &a.StartedAt, &a.FinishedAt, &a.Change, &a.Mode,
			&a.Resolution)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: list attempts: %w", err)
	}
	return out, nil
}

// SpendByKey returns the cost billed under a key for attempts started at or
// after since. With since zero it reads the key's running total (KeySpend)
// instead of summing its whole history.
func SpendByKey(ctx context.Context, db DBTX, key string, since time.Time) (float64, error) {
	if since.IsZero() {
		return KeySpend(ctx, db, key)
	}
	u, err := UsageByKey(ctx, db, key, since)
	return u.SpendUSD, err
}

// UsageByKey returns a key's calls, retries and spend for attempts started at
// or after since, summed from the attempts (an index range on key and
// started_at): for windows such as the spend-rate alert's last hour. A key's
// whole-history spend is KeySpend's running total.
func UsageByKey(ctx context.Context, db DBTX, key string, since time.Time) (KeyUsage, error) {
	var u KeyUsage
	err := db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE is_retry),
			coalesce(sum(cost_usd), 0)::float8,
			coalesce(sum(est_cost_usd) FILTER (WHERE status IN ('possibly_billed', 'intent')), 0)::float8
		FROM triage_attempt WHERE key = $1 AND started_at >= $2`, key, since).
		Scan(&u.Calls, &u.Retries, &u.SpendUSD, &u.PossiblyBilledUSD)
	if err != nil {
		return KeyUsage{}, fmt.Errorf("ledger: usage of key %q: %w", key, err)
	}
	return u, nil
}

// ClassUnreadableOK labels, in UsageByClass, the ok attempts that stayed
// possibly billed: a 2xx whose body was not the vendor's format (a garbage
// 200), dead-lettered as invalid_output; the provider may have billed it.
const ClassUnreadableOK = "ok_unreadable"

// ClassResolved labels, in UsageByClass, the attempts with no class that a
// later send under the same idempotency key settled (an intent left by a
// process that stopped mid-call: status resolved, billed once by that send).
const ClassResolved = "resolved"

// UsageByClass sums the attempts matching f (Limit is ignored) per
// classifier class, in the database: calls, distinct records, retries,
// tokens, billed spend and the possibly-billed estimate. It returns the sums
// over every class (whose Records counts each record once, whatever classes
// its attempts had) and one ClassUsage per class, ordered by class name with
// "" (no class recorded) first. An ok attempt left possibly billed (a 2xx
// whose body was not the vendor's format) is summed under
// ClassUnreadableOK, not ok; an intent a later send settled (resolved) under
// ClassResolved, not "". No attempt is loaded into memory.
func UsageByClass(ctx context.Context, db DBTX, f AttemptFilter) (total ClassUsage, byClass []ClassUsage, err error) {
	rows, err := db.Query(ctx, `SELECT grouping(label) = 1, coalesce(label, ''),
			count(*), count(DISTINCT (batch, record_id)), count(*) FILTER (WHERE is_retry),
			coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),
			coalesce(sum(cost_usd), 0)::float8,
			coalesce(sum(est_cost_usd) FILTER (WHERE status = 'possibly_billed'
				OR (status = 'intent' AND mode <> '`+ModeBatch+`')), 0)::float8,
			coalesce(sum(est_cost_usd) FILTER (WHERE status = 'intent' AND mode = '`+ModeBatch+`'), 0)::float8
		FROM triage_attempt,
			LATERAL (SELECT CASE WHEN class = 'ok' AND status = 'possibly_billed' THEN '`+ClassUnreadableOK+`'
				WHEN class IS NULL AND status = 'resolved' THEN '`+ClassResolved+`' ELSE class END AS label) l
		WHERE ($1 = '' OR batch = $1) AND ($2 = '' OR key = $2)
		GROUP BY GROUPING SETS ((label), ())
		ORDER BY 1, 2`, f.Batch, f.Key)
	if err != nil {
		return ClassUsage{}, nil, fmt.Errorf("ledger: usage by class: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			u     ClassUsage
			isAll bool
		)
		if err := rows.Scan(&isAll, &u.Class, &u.Calls, &u.Records, &u.Retries, &u.InputTokens, &u.OutputTokens,
			&u.SpendUSD, &u.PossiblyBilledUSD, &u.BatchReservedUSD); err != nil {
			return ClassUsage{}, nil, fmt.Errorf("ledger: usage by class: %w", err)
		}
		if isAll {
			u.Class = ""
			total = u
			continue
		}
		byClass = append(byClass, u)
	}
	if err := rows.Err(); err != nil {
		return ClassUsage{}, nil, fmt.Errorf("ledger: usage by class: %w", err)
	}
	return total, byClass, nil
}

// ReasonLookupFound is the reason of an attempt settled by SettleFound: its
// answer was lost, and the provider's store had it (ResolutionFound).
const ReasonLookupFound = "lookup_found"

// SettleFound settles the job's latest unanswered attempt (possibly billed,
// or an intent left by a run that died) under idempotencyKey as billed once:
// the provider's store found the call (a look-up), so it is ok, with the
// stored answer's tokens and cost, its spend counted. It returns the
// attempt's id, or ErrNotFound when the job has no such attempt.
func SettleFound(ctx context.Context, db DBTX, idempotencyKey string, jobID int64, out Outcome) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, `WITH target AS (
		SELECT id, cost_usd AS old_cost FROM triage_attempt
		WHERE idempotency_key = $1 AND job_id = $2 AND status IN ('possibly_billed', 'intent')
		ORDER BY id DESC LIMIT 1 FOR UPDATE
	), upd AS (
		UPDATE triage_attempt a SET status = 'ok', class = 'ok', http_status = 200, vendor_code = NULL, reason = $3, resolution = 'found',
			input_tokens = $4, output_tokens = $5, cost_usd = $6, finished_at = coalesce(a.finished_at, now())
		FROM target WHERE a.id = target.id
		RETURNING a.id, a.batch, a.key, a.cost_usd - target.old_cost AS delta
	), spend AS (
		INSERT INTO triage_spend_delta (batch, key, cost_usd)
		SELECT batch, key, delta FROM upd WHERE delta <> 0
	)
	SELECT id FROM upd`, idempotencyKey, jobID, ReasonLookupFound, out.InputTokens, out.OutputTokens, out.CostUSD).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, fmt.Errorf("ledger: settle found attempt of job %d: %w", jobID, ErrNotFound)
	case err != nil:
		return 0, fmt.Errorf("ledger: settle found attempt of job %d: %w", jobID, err)
	}
	return id, nil
}
