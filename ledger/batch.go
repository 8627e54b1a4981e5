package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// CreateBatch inserts the batch (with its deadline, if any) and its records (with COPY, so 100,000 records
// take well under a second). It is atomic: on a pool it runs in its own
// transaction, on a pgx.Tx in a savepoint, so it can share the transaction of
// River's InsertManyFastTx. A reused batch id is ErrBatchExists; two records
// with one id are ErrDuplicateRecord.
func CreateBatch(ctx context.Context, db DBTX, b Batch, records []Record) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("ledger: create batch: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	b.Total = len(records)
	if err := InsertBatch(ctx, tx, b); err != nil {
		return err
	}
	if err := CopyRecords(ctx, tx, b.ID, records); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("ledger: create batch %q: %w", b.ID, err)
	}
	return nil
}

// InsertBatch inserts the batch row alone (b.Total as given), for an
// enqueue that streams its records in chunks (CopyRecords) and sets the
// total at the end (SetBatchTotal), all in the caller's transaction. A
// reused batch id is ErrBatchExists.
func InsertBatch(ctx context.Context, db DBTX, b Batch) error {
	_, err := db.Exec(ctx, `INSERT INTO triage_batch (id, pipeline, key, total, budget_usd, deadline)
		VALUES ($1, $2, $3, $4, $5, $6)`, b.ID, b.Pipeline, b.Key, b.Total, b.BudgetUSD, b.Deadline)
	if err != nil {
		return fmt.Errorf("ledger: create batch %q: %w", b.ID, mapUnique(err))
	}
	return nil
}

// CopyRecords writes records of batch with COPY. An id already in the
// batch is ErrDuplicateRecord (and, COPY being one statement, fails the
// caller's transaction: look first with RecordLines to name both lines).
func CopyRecords(ctx context.Context, db DBTX, batch string, records []Record) error {
	if len(records) == 0 {
		return nil
	}
	_, err := db.CopyFrom(ctx, pgx.Identifier{"triage_record"}, []string{"batch", "record_id", "line", "data"},
		pgx.CopyFromSlice(len(records), func(i int) ([]any, error) {
			r := records[i]
			data := r.Data
			if len(data) == 0 {
				data = json.RawMessage("null")
			}
			return []any{batch, r.ID, r.Line, []byte(data)}, nil
		}))
	if err != nil {
		return fmt.Errorf("ledger: create batch %q: records: %w", batch, mapUnique(err))
	}
	return nil
}

// SetBatchTotal stores the number of records of a batch written with
// CopyRecords. ErrNotFound.
func SetBatchTotal(ctx context.Context, db DBTX, batch string, total int) error {
	tag, err := db.Exec(ctx, `UPDATE triage_batch SET total = $2 WHERE id = $1`, batch, total)
	if err != nil {
		return fmt.Errorf("ledger: batch %q total: %w", batch, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("ledger: batch %q: %w", batch, ErrNotFound)
	}
	return nil
}

// RecordLines returns the input line of each of ids that batch already
// holds (ids it does not hold are absent from the map): how a streaming
// enqueue names the earlier line of a duplicate id.
func RecordLines(ctx context.Context, db DBTX, batch string, ids []string) (map[string]int, error) {
	rows, err := db.Query(ctx, `SELECT record_id, line FROM triage_record WHERE batch = $1 AND record_id = ANY($2)`, batch, ids)
	if err != nil {
		return nil, fmt.Errorf("ledger: batch %q record lines: %w", batch, err)
	}
	out := map[string]int{}
	var id string
	var line int
	_, err = pgx.ForEachRow(rows, []any{&id, &line}, func() error {
		out[id] = line
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: batch %q record lines: %w", batch, err)
	}
	return out, nil
}

// mapUnique turns unique violations on batch and record keys into the
// domain errors.
func mapUnique(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		switch pgErr.ConstraintName {
		case "triage_batch_pkey":
			return ErrBatchExists
		case "triage_record_pkey":
			return ErrDuplicateRecord
		}
	}
	return err
}

const batchColumns = `b.id, b.pipeline, b.key, b.total, b.budget_usd::float8, ` + batchSpentSQL + `::float8, b.state, b.created_at, b.deadline`

func scanBatch(row pgx.Row) (Batch, error) {
	var b Batch
	err := row.Scan(&b.ID, &b.Pipeline, &b.Key, &b.Total, &b.BudgetUSD, &b.SpentUSD, &b.State, &b.CreatedAt, &b.Deadline)
	return b, err
}

// GetBatch returns one batch (ErrNotFound), including its spend so far and
// budget, for the per-call budget check.
func GetBatch(ctx context.Context, db DBTX, id string) (Batch, error) {
	b, err := scanBatch(db.QueryRow(ctx, `SELECT `+batchColumns+` FROM triage_batch b WHERE b.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Batch{}, fmt.Errorf("ledger: batch %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Batch{}, fmt.Errorf("ledger: batch %q: %w", id, err)
	}
	return b, nil
}

// SetBatchState stores a batch's state: BatchRunning, BatchPausedExhausted,
// BatchPausedBudget, BatchPaused or BatchCancelled (settled is derived,
// never stored). ErrNotFound.
func SetBatchState(ctx context.Context, db DBTX, id string, state BatchState) error {
	switch state {
	case BatchRunning, BatchPausedExhausted, BatchPausedBudget, BatchPaused, BatchCancelled:
	default:
		return fmt.Errorf("ledger: batch %q: state %q cannot be stored", id, state)
	}
	tag, err := db.Exec(ctx, `UPDATE triage_batch SET state = $2 WHERE id = $1`, id, string(state))
	if err != nil {
		return fmt.Errorf("ledger: set batch %q state: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("ledger: batch %q: %w", id, ErrNotFound)
	}
	return nil
}

// SetBatchBudget sets (or, with nil, removes) a batch's spend cap and, if the
// batch was paused_budget, sets it running again (`triage batch budget`).
// ErrNotFound.
func SetBatchBudget(ctx context.Context, db DBTX, id string, budgetUSD *float64) error {
	tag, err := db.Exec(ctx, `UPDATE triage_batch
		SET budget_usd = $2,
		    state = CASE WHEN state = 'paused_budget' THEN 'running' ELSE state END
		WHERE id = $1`, id, budgetUSD)
	if err != nil {
		return fmt.Errorf("ledger: set batch %q budget: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("ledger: batch %q: %w", id, ErrNotFound)
	}
	return nil
}

// stateSQL is a batch's state before the settled check, over a
// triage_batch row aliased b: paused_exhausted while its key's breaker
// (triage_key_state, shared by the fleet) is not closed, paused_budget as
// stored, else running; a batch paused or cancelled by hand reads so
// whatever its key does. The breaker is the truth for exhaustion, not a state
// the batch once stored. One rule for `triage status`, `triage run` and the
// metrics.
const stateSQL = `CASE
    WHEN b.state IN ('paused', 'cancelled') THEN b.state
    WHEN EXISTS (SELECT 1 FROM triage_key_state k WHERE k.key = b.key AND k.state <> 'closed') THEN 'paused_exhausted'
    WHEN b.state = 'paused_budget' THEN 'paused_budget'
    ELSE 'running' END`

// statusQuery computes Status for the batches matched by its WHERE clause.
// Each count is one indexed aggregate per batch.
const statusQuery = `
SELECT b.id, b.pipeline, b.key, b.total, ` + stateSQL + `,
       (SELECT count(*) FROM triage_result r WHERE r.batch = b.id),
       (SELECT count(*) FROM triage_dead_letter d WHERE d.batch = b.id AND d.requeued_at IS NULL),
       (SELECT count(*) FROM triage_dead_letter d WHERE d.batch = b.id AND d.requeued_at IS NULL
           AND d.reason IN ('` + ReasonCancelledByHand + `', '` + ReasonJobMissing + `', '` + ReasonCancelled + `')),
       a.calls, a.spend::float8, a.possibly_billed::float8,
       b.fallback_jobs,
       (SELECT coalesce(jsonb_object_agg(m.model, m.n), '{}') FROM (
           SELECT t.model, count(*) AS n FROM triage_result r JOIN triage_attempt t ON t.id = r.attempt_id
           WHERE r.batch = b.id GROUP BY t.model) m),
       b.deadline,
       a.sync_calls, a.sync_spend, a.batch_calls, a.batch_spend, a.batch_sync_cost, a.batch_saved,
       a.batch_reserved::float8, a.strays, a.stray_usd::float8
FROM triage_batch b
CROSS JOIN LATERAL (
    SELECT count(*) AS calls,
           coalesce(sum(cost_usd), 0) AS spend,
           coalesce(sum(est_cost_usd) FILTER (WHERE status = 'possibly_billed'
               OR (status = 'intent' AND mode <> '` + ModeBatch + `')), 0) AS possibly_billed,
           coalesce(sum(est_cost_usd) FILTER (WHERE status = 'intent' AND mode = '` + ModeBatch + `'), 0) AS batch_reserved,
           count(*) FILTER (WHERE reason = '` + ReasonStrayDuplicate + `') AS strays,
           coalesce(sum(cost_usd) FILTER (WHERE reason = '` + ReasonStrayDuplicate + `'), 0) AS stray_usd,
           ` + modeSumsSQL + `
    FROM triage_attempt t WHERE t.batch = b.id
) a
`

func scanStatus(row pgx.Row) (Status, error) {
	var (
		s Status
		m modeSums
	)
	if err := row.Scan(&s.Batch, &s.Pipeline, &s.Key, &s.Total, &s.State, &s.Completed, &s.DeadLettered, &s.Cancelled,
		&s.Calls, &s.SpendUSD, &s.PossiblyBilledUSD, &s.Fallback, &s.Models, &s.Deadline,
		&m.syncCalls, &m.syncSpend, &m.batchCalls, &m.batchSpend, &m.batchSyncCost, &m.batchSaved, &s.BatchReservedUSD,
		&s.StrayDuplicates, &s.StrayDuplicateUSD); err != nil {
		return Status{}, err
	}
	s.ByMode, s.BatchSavedUSD = m.usage()
	s.Pending = max(s.Total-s.Completed-s.DeadLettered, 0)
	if s.Completed+s.DeadLettered >= s.Total {
		s.State = BatchSettled
	}
	return s, nil
}

// BatchStatus returns a batch's progress in the `triage status --json` shape:
// completed counts stored results, dead_lettered the dead letters not
// requeued (cancelled the part of them whose job was cancelled or deleted by
// hand), calls every attempt, spend_usd the billed cost, and
// possibly_billed_usd the estimated cost of attempts still ambiguous
// (possibly_billed, or a synchronous call's intent not finished), and
// batch_reserved_usd that of batch-mode lines waiting for their provider
// batch's answer (not ambiguous: the answer is on its way). State is settled once
// completed + dead_lettered = total, else stateSQL's. The fields of batch
// mode (deadline, by_mode, batch_saved_usd, provider_batches) are set only
// when the batch has them. ErrNotFound.
func BatchStatus(ctx context.Context, db DBTX, id string) (Status, error) {
	s, err := scanStatus(db.QueryRow(ctx, statusQuery+`WHERE b.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Status{}, fmt.Errorf("ledger: batch %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Status{}, fmt.Errorf("ledger: batch %q status: %w", id, err)
	}
	inFlight, err := providerBatchesInFlight(ctx, db, []string{id})
	if err != nil {
		return Status{}, err
	}
	s.ProviderBatches = inFlight[id]
	unsent, err := batchLinesUnsent(ctx, db, []string{id})
	if err != nil {
		return Status{}, err
	}
	s.BatchLinesUnsent = unsent[id]
	return s, nil
}

// ListBatches returns every batch's status, oldest first.
func ListBatches(ctx context.Context, db DBTX) ([]Status, error) {
	rows, err := db.Query(ctx, statusQuery+`ORDER BY b.created_at, b.id`)
	if err != nil {
		return nil, fmt.Errorf("ledger: list batches: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Status, error) { return scanStatus(r) })
	if err != nil {
		return nil, fmt.Errorf("ledger: list batches: %w", err)
	}
	inFlight, err := providerBatchesInFlight(ctx, db, nil)
	if err != nil {
		return nil, err
	}
	unsent, err := batchLinesUnsent(ctx, db, nil)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].ProviderBatches = inFlight[out[i].Batch]
		out[i].BatchLinesUnsent = unsent[out[i].Batch]
	}
	return out, nil
}

// Records returns a batch's records with the given ids (all records when ids
// is nil, none when it is empty), ordered by line: for requeue and for
// workers that load a record by id. Unknown ids are skipped.
func Records(ctx context.Context, db DBTX, batch string, ids []string) ([]Record, error) {
	rows, err := db.Query(ctx, `SELECT record_id, line, data FROM triage_record
		WHERE batch = $1 AND ($2::text[] IS NULL OR record_id = ANY($2))
		ORDER BY line, record_id`, batch, ids)
	if err != nil {
		return nil, fmt.Errorf("ledger: batch %q records: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Record, error) {
		var rec Record
		err := r.Scan(&rec.ID, &rec.Line, &rec.Data)
		return rec, err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: batch %q records: %w", batch, err)
	}
	return out, nil
}

// Results iterates over a batch's records in line order with their stored
// output (nil for records without a result), for `triage export`. Rows
// stream from the database: a 200,000-record batch is never held in memory.
// The query holds db's connection until the loop ends, so inside a pgx.Tx
// run no other statement on the same tx in the loop body. A failure is
// yielded once as the last element.
func Results(ctx context.Context, db DBTX, batch string) iter.Seq2[ResultRow, error] {
	return func(yield func(ResultRow, error) bool) {
		rows, err := db.Query(ctx, `SELECT rec.record_id, rec.line, rec.data, res.output, coalesce(res.attempt_id, 0),
				coalesce(a.change, ''), coalesce(a.partial_text IS NOT NULL, false), coalesce(a.model, '')
			FROM triage_record rec
			LEFT JOIN triage_result res ON res.batch = rec.batch AND res.record_id = rec.record_id
			LEFT JOIN triage_attempt a ON a.id = res.attempt_id
			WHERE rec.batch = $1
			ORDER BY rec.line, rec.record_id`, batch)
		if err != nil {
			yield(ResultRow{}, fmt.Errorf("ledger: batch %q results: %w", batch, err))
			return
		}
		defer rows.Close()
		for rows.Next() {
			var r ResultRow
			if err := rows.Scan(&r.ID, &r.Line, &r.Data, &r.Output, &r.AttemptID, &r.Change, &r.Partial, &r.Model); err != nil {
				yield(ResultRow{}, fmt.Errorf("ledger: batch %q results: %w", batch, err))
				return
			}
			if !yield(r, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(ResultRow{}, fmt.Errorf("ledger: batch %q results: %w", batch, err))
		}
	}
}

// StoreResult stores a record's output; call it in the transaction of River's
// JobCompleteTx so "completed" means "result stored". Idempotent: if the
// record already has a result the first one is kept (the provider billed
// once; a replay does not overwrite). Text outputs are stored as a JSON
// string.
func StoreResult(ctx context.Context, db DBTX, batch, recordID string, attemptID int64, output json.RawMessage) error {
	_, err := db.Exec(ctx, `INSERT INTO triage_result (batch, record_id, attempt_id, output)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (batch, record_id) DO NOTHING`, batch, recordID, attemptID, []byte(output))
	if err != nil {
		return fmt.Errorf("ledger: store result %s/%s: %w", batch, recordID, err)
	}
	return nil
}

// HasResult reports whether the record has a stored result.
func HasResult(ctx context.Context, db DBTX, batch, recordID string) (bool, error) {
	var ok bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM triage_result WHERE batch = $1 AND record_id = $2)`,
		batch, recordID).Scan(&ok); err != nil {
		return false, fmt.Errorf("ledger: result of %s/%s: %w", batch, recordID, err)
	}
	return ok, nil
}
