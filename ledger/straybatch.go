package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// # Stray provider batches
//
// A process whose lease on a provider batch row ran out during its create
// (a stall longer than the lease, a database outage) may have created a
// second provider batch of the row's lines: the process that took the row
// over looked before that create landed, found nothing, and created its
// own. The stray is cancelled, but the provider bills each of its lines
// that ran before the cancel. So it is recorded as a row of its own
// (RecordStrayBatch: stray_of the row whose lines it holds, state
// submitted, its cancel asked for), polled to its end like any provider
// batch, and collected by CollectStrayBatch: each line it ran is a paid
// duplicate of its record, an attempt of its own with reason
// ReasonStrayDuplicate and the answer's cost (in the spend counters), never
// applied as the record's result and never sent again. Lines the cancel
// stopped cost nothing and leave no trace. A stray row holds no line: the
// lines stay the original row's, whose batch is the record's.

// ReasonStrayDuplicate is the reason of a paid duplicate: a line a stray
// provider batch ran, billed by the provider, whose answer is not the
// record's (the record's line in its own provider batch is).
const ReasonStrayDuplicate = "stray_duplicate"

// strayKeySep separates, in a paid duplicate's idempotency key, the line's
// custom_id from the stray row's id: the duplicate is not one of the
// record's sends, so the statements reading a record's sends by its key
// (PriorOutcome, ResolvePossiblyBilled, SettleFound, …) never count it.
const strayKeySep = "~stray-"

// StrayKey is the idempotency key of the paid duplicate of customID in
// stray row id.
func StrayKey(customID string, id int64) string {
	return customID + strayKeySep + strconv.FormatInt(id, 10)
}

// RecordStrayBatch records b, a provider batch created for r's lines (ids
// lines) by a process whose lease on r ran out during the create, as a row
// of its own: stray_of r, state submitted, its cancel asked for, due a
// poll at nextPoll, with the attempts of its lines. recorded false: the
// provider batch is recorded already (r's new owner found this very batch
// and recorded it as r's): it is no stray, nothing is written.
func RecordStrayBatch(ctx context.Context, db DBTX, r ProviderBatch, lines []int64, b SubmittedBatch, now, nextPoll time.Time) (id int64, recorded bool, err error) {
	var expires *time.Time
	if !b.ExpiresAt.IsZero() {
		expires = &b.ExpiresAt
	}
	err = db.QueryRow(ctx, `INSERT INTO triage_provider_batch (key, vendor, model, lines, state, provider_batch_id,
			input_file_id, vendor_status, counts, submitted_at, expires_at, next_poll_at, cancel_requested, tag,
			stray_of, stray_attempts)
		SELECT p.key, p.vendor, p.model, cardinality($2::bigint[]), 'submitted', $3,
			coalesce(nullif($4, ''), p.input_file_id), $5, coalesce($6::jsonb, '{}'), $7, $8, $9, true, p.tag,
			p.id, (SELECT coalesce(array_agg(l.attempt_id ORDER BY l.id), '{}') FROM triage_provider_batch_line l
				WHERE l.id = ANY($2) AND l.attempt_id IS NOT NULL)
		FROM triage_provider_batch p WHERE p.id = $1
		ON CONFLICT (key, provider_batch_id) WHERE provider_batch_id IS NOT NULL DO NOTHING
		RETURNING id`, r.ID, lines, b.ProviderID, b.InputFileID, b.VendorStatus, b.Counts, now, expires, nextPoll).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("ledger: record stray provider batch %s of %d: %w", b.ProviderID, r.ID, err)
	}
	return id, true, nil
}

// StrayAttempt is the attempt of one line of a stray provider batch.
type StrayAttempt struct {
	ID int64
	// CustomID is the line's custom_id (the attempt's idempotency key).
	CustomID string
	// Model priced the line.
	Model      string
	EstCostUSD float64
}

// StrayAttempts returns the attempts of the lines of stray row id.
func StrayAttempts(ctx context.Context, db DBTX, id int64) ([]StrayAttempt, error) {
	rows, err := db.Query(ctx, `SELECT a.id, a.idempotency_key, a.model, a.est_cost_usd::float8
		FROM triage_provider_batch p JOIN triage_attempt a ON a.id = ANY(p.stray_attempts)
		WHERE p.id = $1 ORDER BY a.id`, id)
	if err != nil {
		return nil, fmt.Errorf("ledger: attempts of stray provider batch %d: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[StrayAttempt])
	if err != nil {
		return nil, fmt.Errorf("ledger: attempts of stray provider batch %d: %w", id, err)
	}
	return out, nil
}

// PaidDuplicate is a line a stray provider batch ran: Of is the line's
// attempt (the record's), Outcome what the line came to (its class,
// tokens and cost; AttemptPossiblyBilled with no cost when its result
// could not be read).
type PaidDuplicate struct {
	Of      int64
	Outcome Outcome
}

// CollectStrayBatch ends stray row r (collected at now, under r's lease:
// ErrLeaseLost) and records dups, each an attempt of its own: the record,
// job, key and model of the attempt it duplicates, idempotency key
// StrayKey, reason ReasonStrayDuplicate, mode batch, and its cost appended
// to the spend counters. One transaction: a collection cut midway records
// nothing, and is done again whole by the row's next claim.
func CollectStrayBatch(ctx context.Context, db DBTX, r ProviderBatch, dups []PaidDuplicate, now time.Time) error {
	n := len(dups)
	var (
		of                  = make([]int64, n)
		status, class, code = make([]string, n), make([]string, n), make([]string, n)
		httpStatus, in, out = make([]int32, n), make([]int32, n), make([]int32, n)
		cost                = make([]float64, n)
		syncCost            = make([]*float64, n)
	)
	for i, d := range dups {
		if err := checkOutcome(d.Of, d.Outcome); err != nil {
			return err
		}
		o := d.Outcome
		of[i], status[i], class[i], code[i] = d.Of, string(o.Status), o.Class.String(), o.VendorCode
		httpStatus[i], in[i], out[i] = int32(o.HTTPStatus), int32(o.InputTokens), int32(o.OutputTokens)
		cost[i], syncCost[i] = o.CostUSD, o.SyncCostUSD
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE triage_provider_batch SET state = 'collected', collected_at = $2
			WHERE id = $1 AND next_poll_at = $3 AND state IN ('submitted', 'ended') AND stray_of IS NOT NULL`,
			r.ID, now, r.Lease)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrLeaseLost
		}
		if n == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `WITH ins AS (
			INSERT INTO triage_attempt (batch, record_id, job_id, attempt, key, model, idempotency_key, request_hash,
				status, class, http_status, vendor_code, reason, input_tokens, output_tokens, cost_usd, est_cost_usd,
				sync_cost_usd, started_at, finished_at, mode, resolution)
			SELECT a.batch, a.record_id, a.job_id, a.attempt, a.key, a.model,
				a.idempotency_key || $11 || $1::bigint::text, a.request_hash,
				v.status, v.class, nullif(v.http_status, 0), nullif(v.code, ''), $12, v.in_tok, v.out_tok, v.cost,
				a.est_cost_usd, v.sync_cost, $13, $13, '`+ModeBatch+`',
				CASE WHEN v.status = 'possibly_billed' THEN 'unknown' END
			FROM unnest($2::bigint[], $3::text[], $4::text[], $5::int[], $6::text[], $7::int[], $8::int[],
				$9::numeric[], $10::numeric[]) AS v(of, status, class, http_status, code, in_tok, out_tok, cost, sync_cost)
			JOIN triage_attempt a ON a.id = v.of
			RETURNING batch, key, cost_usd
		)
		INSERT INTO triage_spend_delta (batch, key, cost_usd)
		SELECT batch, key, cost_usd FROM ins WHERE cost_usd <> 0`,
			r.ID, of, status, class, httpStatus, code, in, out, cost, syncCost, strayKeySep,
			ReasonStrayDuplicate, now)
		return err
	})
	if errors.Is(err, ErrLeaseLost) {
		return fmt.Errorf("ledger: collect stray provider batch %d: %w", r.ID, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("ledger: collect stray provider batch %d: %w", r.ID, err)
	}
	return nil
}
