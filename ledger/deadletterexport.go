package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"time"
)

// DeadLetterExport is one line of `triage dlq export`: the list fields, the
// input record as enqueued (null when it is gone) and the redacted error
// excerpt. Re-importing the "record" fields gives back exactly the dead
// letters' records.
type DeadLetterExport struct {
	DeadLetterListItem
	Record       json.RawMessage `json:"record"`
	ErrorExcerpt string          `json:"error_excerpt"`
	Known        bool            `json:"known"`
}

// ExportDeadLetters iterates over the dead letters matching f, oldest
// first, each with its input record. Rows stream from the database: a
// million dead letters are never held in memory. The query holds db's
// connection until the loop ends (inside a pgx.Tx run no other statement on
// the same tx in the loop body). A failure is yielded once as the last
// element.
func ExportDeadLetters(ctx context.Context, db DBTX, f DeadLetterFilter) iter.Seq2[DeadLetterExport, error] {
	return func(yield func(DeadLetterExport, error) bool) {
		rows, err := db.Query(ctx, `SELECT d.id, d.batch, d.record_id, d.class, d.reason,
				d.http_status, d.vendor_code, d.attempts, d.created_at, d.error_excerpt, d.unknown, r.data,
				nullif(d.suspect, '')
			FROM triage_dead_letter d
			LEFT JOIN triage_record r ON r.batch = d.batch AND r.record_id = d.record_id
			WHERE ($1 = '' OR d.batch = $1) AND ($2 = '' OR d.class = $2) AND ($3 = '' OR d.reason = $3)
			  AND ($4 OR d.requeued_at IS NULL) AND (NOT $5 OR d.unknown) AND (NOT $6 OR d.suspect <> '')
			ORDER BY d.id`, f.Batch, f.Class, f.Reason, f.IncludeRequeued, f.Unknown, f.Suspect)
		if err != nil {
			yield(DeadLetterExport{}, fmt.Errorf("ledger: export dead letters: %w", err))
			return
		}
		defer rows.Close()
		for rows.Next() {
			var (
				x       DeadLetterExport
				unknown bool
				created time.Time
				data    []byte
			)
			if err := rows.Scan(&x.ID, &x.Batch, &x.RecordID, &x.Class, &x.Reason, &x.Status, &x.Code,
				&x.Attempts, &created, &x.ErrorExcerpt, &unknown, &data, &x.Suspect); err != nil {
				yield(DeadLetterExport{}, fmt.Errorf("ledger: export dead letters: %w", err))
				return
			}
			x.CreatedAt, x.Known = created, !unknown
			x.Record = json.RawMessage("null")
			if data != nil {
				x.Record = data
			}
			if !yield(x, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(DeadLetterExport{}, fmt.Errorf("ledger: export dead letters: %w", err))
		}
	}
}
