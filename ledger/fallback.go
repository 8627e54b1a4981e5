package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ModelUsage is what the calls on one model came to: with fallback models
// a batch's records can be answered by more than one.
type ModelUsage struct {
	Model string `json:"model"`
	Key   string `json:"key"`
	Calls int    `json:"calls"`
	// Answered counts the records whose stored result this model gave.
	Answered int     `json:"answered"`
	SpendUSD float64 `json:"spend_usd"`
}

// UsageByModel sums the attempts matched by f per model and key, ordered
// by model and key.
func UsageByModel(ctx context.Context, db DBTX, f AttemptFilter) ([]ModelUsage, error) {
	rows, err := db.Query(ctx, `SELECT a.model, a.key, count(*), count(r.attempt_id), coalesce(sum(a.cost_usd), 0)::float8
		FROM triage_attempt a
		LEFT JOIN triage_result r ON r.attempt_id = a.id
		WHERE ($1 = '' OR a.batch = $1) AND ($2 = '' OR a.key = $2)
		GROUP BY a.model, a.key
		ORDER BY a.model, a.key`, f.Batch, f.Key)
	if err != nil {
		return nil, fmt.Errorf("ledger: usage by model: %w", err)
	}
	defer rows.Close()
	out := []ModelUsage{}
	for rows.Next() {
		var u ModelUsage
		if err := rows.Scan(&u.Model, &u.Key, &u.Calls, &u.Answered, &u.SpendUSD); err != nil {
			return nil, fmt.Errorf("ledger: usage by model: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: usage by model: %w", err)
	}
	return out, nil
}

// FallbackRoom locks batch's row (until tx ends) and reports whether one
// more job may leave its own model under share (the batch's
// fallback_max_share, > 0): fallback_jobs + 1 <= floor(share * total).
// Two moves at once cannot both take the last place. A batch with no row
// has no room.
func FallbackRoom(ctx context.Context, tx DBTX, batch string, share float64) (bool, error) {
	var room bool
	err := tx.QueryRow(ctx, `SELECT fallback_jobs + 1 <= floor($2::float8 * total) FROM triage_batch WHERE id = $1 FOR UPDATE`,
		batch, share).Scan(&room)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledger: fallback room of batch %q: %w", batch, err)
	}
	return room, nil
}

// CountFallback counts one more job of batch moved off its own model
// (FallbackRoom), in the move's transaction.
func CountFallback(ctx context.Context, tx DBTX, batch string) error {
	if _, err := tx.Exec(ctx, `UPDATE triage_batch SET fallback_jobs = fallback_jobs + 1 WHERE id = $1`, batch); err != nil {
		return fmt.Errorf("ledger: count a fallback of batch %q: %w", batch, err)
	}
	return nil
}
