package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AddDeadLetter records a record that will not be retried and returns the dead
// letter's id. ErrorExcerpt is passed through Redact. Idempotent: a record
// has at most one dead letter not yet requeued, and dead-lettering it again
// returns that one's id and changes nothing (a worker that dies between the
// dead letter and cancelling its job may dead-letter the same record twice).
// A record that already has a result is done: nothing is written and the
// error wraps ErrHasResult (a late run of a record, such as a rescued run
// past its bounds, must not also dead-letter it).
func AddDeadLetter(ctx context.Context, db DBTX, row DeadLetterRow) (int64, error) {
	var request []byte
	if len(row.Request) > 0 {
		request = row.Request
	}
	args := []any{row.Batch, row.RecordID, row.JobID, row.Pipeline, row.Key, row.Class.String(), row.Reason,
		nullInt(row.HTTPStatus), nullString(row.VendorCode), row.Attempts, request,
		Redact(row.ErrorExcerpt), nowArg(row.Now), row.Rule, row.Unknown, row.Suspect}
	var (
		id        int64
		hasResult bool
	)
	err := db.QueryRow(ctx, addDeadLetterSQL, args...).Scan(&id, &hasResult)
	if errors.Is(err, pgx.ErrNoRows) {
		// A concurrent insert of the same record committed after this
		// statement's snapshot was taken: the conflict was seen, the row
		// was not. A new statement sees it.
		err = db.QueryRow(ctx, addDeadLetterSQL, args...).Scan(&id, &hasResult)
	}
	if err == nil && hasResult {
		err = ErrHasResult
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: dead letter %s/%s: %w", row.Batch, row.RecordID, err)
	}
	return id, nil
}

const addDeadLetterSQL = `WITH done AS (
		SELECT EXISTS (SELECT 1 FROM triage_result WHERE batch = $1 AND record_id = $2) AS has
	), lost AS (
		UPDATE triage_attempt SET resolution = 'dead_lettered'
		WHERE batch = $1 AND record_id = $2 AND ` + lostSQL + `
			AND (resolution IS NULL OR resolution = 'unknown') AND NOT (SELECT has FROM done)
	), ins AS (
		INSERT INTO triage_dead_letter
			(batch, record_id, job_id, pipeline, key, class, reason, http_status, vendor_code,
			 attempts, request, error_excerpt, created_at, rule, unknown, suspect)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, coalesce($13, now()), $14, $15, $16
		WHERE NOT (SELECT has FROM done)
		ON CONFLICT (batch, record_id) WHERE requeued_at IS NULL DO NOTHING
		RETURNING id
	)
	SELECT id, false FROM ins
	UNION ALL
	SELECT id, false FROM triage_dead_letter
	WHERE batch = $1 AND record_id = $2 AND requeued_at IS NULL AND NOT EXISTS (SELECT 1 FROM ins)
	  AND NOT (SELECT has FROM done)
	UNION ALL
	SELECT 0, true FROM done WHERE has`

const deadLetterColumns = `id, batch, record_id, job_id, pipeline, key, class, reason,
	coalesce(http_status, 0), coalesce(vendor_code, ''), attempts, request, error_excerpt, requeued_at, created_at,
	rule, unknown, suspect`

func scanDeadLetter(row pgx.Row) (DeadLetter, error) {
	var d DeadLetter
	err := row.Scan(&d.ID, &d.Batch, &d.RecordID, &d.JobID, &d.Pipeline, &d.Key, &d.Class, &d.Reason,
		&d.HTTPStatus, &d.VendorCode, &d.Attempts, &d.Request, &d.ErrorExcerpt, &d.RequeuedAt, &d.CreatedAt,
		&d.Rule, &d.Unknown, &d.Suspect)
	return d, err
}

// ListDeadLetters returns the dead letters matching f, oldest first.
func ListDeadLetters(ctx context.Context, db DBTX, f DeadLetterFilter) ([]DeadLetter, error) {
	rows, err := db.Query(ctx, `SELECT `+deadLetterColumns+` FROM triage_dead_letter
		WHERE ($1 = '' OR batch = $1) AND ($2 = '' OR class = $2) AND ($3 = '' OR reason = $3)
		  AND ($4 OR requeued_at IS NULL) AND (NOT $5 OR unknown) AND (NOT $6 OR suspect <> '')
		ORDER BY id`, f.Batch, f.Class, f.Reason, f.IncludeRequeued, f.Unknown, f.Suspect)
	if err != nil {
		return nil, fmt.Errorf("ledger: list dead letters: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadLetter, error) { return scanDeadLetter(r) })
	if err != nil {
		return nil, fmt.Errorf("ledger: list dead letters: %w", err)
	}
	return out, nil
}

// GetDeadLetter returns one dead letter, requeued or not (ErrNotFound).
func GetDeadLetter(ctx context.Context, db DBTX, id int64) (DeadLetter, error) {
	d, err := scanDeadLetter(db.QueryRow(ctx, `SELECT `+deadLetterColumns+` FROM triage_dead_letter WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return DeadLetter{}, fmt.Errorf("ledger: dead letter %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("ledger: dead letter %d: %w", id, err)
	}
	return d, nil
}

// MarkRequeued marks the given dead letters requeued and returns the ids it
// marked, in order: those not requeued before. Requeue exactly those, in the
// same transaction, and running requeue twice (or twice at once) requeues
// no record twice. Unknown ids are skipped. Their batches are pending
// again: their next settle is announced anew (ClaimSettled).
func MarkRequeued(ctx context.Context, db DBTX, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := db.Query(ctx, `WITH upd AS (
		UPDATE triage_dead_letter SET requeued_at = now()
		WHERE id = ANY($1) AND requeued_at IS NULL
		RETURNING id, batch
	), pending AS (
		UPDATE triage_batch b SET settle_notified_at = NULL
		WHERE b.id IN (SELECT batch FROM upd) AND b.settle_notified_at IS NOT NULL
	) SELECT id FROM upd ORDER BY id`, ids)
	if err != nil {
		return nil, fmt.Errorf("ledger: mark requeued: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("ledger: mark requeued: %w", err)
	}
	return out, nil
}

// ListItem returns d in the exact `triage dlq list --json` shape.
func (d DeadLetter) ListItem() DeadLetterListItem {
	return DeadLetterListItem{
		ID: d.ID, Batch: d.Batch, RecordID: d.RecordID, Class: d.Class, Reason: d.Reason,
		Status: nullInt(d.HTTPStatus), Code: nullString(d.VendorCode),
		Attempts: d.Attempts, CreatedAt: d.CreatedAt, Suspect: nullString(d.Suspect),
	}
}

// MarkSuspect marks the given dead letters suspect for why, those not
// suspect already (a dead letter keeps its first reason), and returns how
// many it marked: the safety net marks the dead letters of the failure it
// held a key for.
func MarkSuspect(ctx context.Context, db DBTX, ids []int64, why string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	tag, err := db.Exec(ctx, `UPDATE triage_dead_letter SET suspect = $2 WHERE id = ANY($1) AND suspect = ''`, ids, why)
	if err != nil {
		return 0, fmt.Errorf("ledger: mark suspect: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// MarshalJSON writes the list shape's fields followed by the detail fields
// job_id, pipeline, key, request, error_excerpt, requeued_at, rule and
// known (`triage dlq show --json`).
func (d DeadLetter) MarshalJSON() ([]byte, error) {
	request := d.Request
	if len(request) == 0 {
		request = json.RawMessage("null")
	}
	return json.Marshal(struct {
		DeadLetterListItem
		JobID        int64           `json:"job_id"`
		Pipeline     string          `json:"pipeline"`
		Key          string          `json:"key"`
		Request      json.RawMessage `json:"request"`
		ErrorExcerpt string          `json:"error_excerpt"`
		RequeuedAt   *time.Time      `json:"requeued_at"`
		Rule         string          `json:"rule"`
		Known        bool            `json:"known"`
	}{d.ListItem(), d.JobID, d.Pipeline, d.Key, request, d.ErrorExcerpt, d.RequeuedAt, d.Rule, !d.Unknown})
}

// DeadLettersOfKey returns the dead letters of key in class that are not
// requeued and were created at or after since, oldest first: the
// candidates the safety net takes back when it holds the key for a
// rejection streak.
func DeadLettersOfKey(ctx context.Context, db DBTX, key, class string, since time.Time) ([]DeadLetter, error) {
	rows, err := db.Query(ctx, `SELECT `+deadLetterColumns+` FROM triage_dead_letter
		WHERE key = $1 AND class = $2 AND requeued_at IS NULL AND created_at >= $3
		ORDER BY id`, key, class, since)
	if err != nil {
		return nil, fmt.Errorf("ledger: dead letters of key %s: %w", key, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadLetter, error) { return scanDeadLetter(r) })
	if err != nil {
		return nil, fmt.Errorf("ledger: dead letters of key %s: %w", key, err)
	}
	return out, nil
}

// RequeuedDeadLetters returns the dead letters of one record of batch that
// were requeued, oldest first: the safety net does not count a record's
// rejection towards a streak when the record was dead-lettered for the
// same failure and requeued before (it has had its second chance).
func RequeuedDeadLetters(ctx context.Context, db DBTX, batch, recordID string) ([]DeadLetter, error) {
	rows, err := db.Query(ctx, `SELECT `+deadLetterColumns+` FROM triage_dead_letter
		WHERE batch = $1 AND record_id = $2 AND requeued_at IS NOT NULL
		ORDER BY id`, batch, recordID)
	if err != nil {
		return nil, fmt.Errorf("ledger: requeued dead letters of %s/%s: %w", batch, recordID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadLetter, error) { return scanDeadLetter(r) })
	if err != nil {
		return nil, fmt.Errorf("ledger: requeued dead letters of %s/%s: %w", batch, recordID, err)
	}
	return out, nil
}
