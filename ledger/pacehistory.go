package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PaceHistoryStep is the spacing of a key's pace history: one row per key
// per step, the first process to reach it writes it.
const PaceHistoryStep = 10 * time.Second

// PacePoint is a key's pace at one moment (triage_pace_history).
type PacePoint struct {
	Key string
	// At is the step (a multiple of PaceHistoryStep).
	At time.Time
	// Source is where the pace came from (keys.PaceSource).
	Source string
	// RatePerS is the requests per second the fleet paced the key at;
	// LimitPerS the provider's request limit per second, nil when none
	// was known.
	RatePerS  float64
	LimitPerS *float64
}

// RecordPace writes p at its step (p.At truncated to PaceHistoryStep),
// unless a row for the key's step exists already.
func RecordPace(ctx context.Context, db DBTX, p PacePoint) error {
	_, err := db.Exec(ctx, `INSERT INTO triage_pace_history (key, at, source, rate_per_s, limit_per_s)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key, at) DO NOTHING`,
		p.Key, p.At.Truncate(PaceHistoryStep), p.Source, p.RatePerS, p.LimitPerS)
	if err != nil {
		return fmt.Errorf("ledger: record pace of key %q: %w", p.Key, err)
	}
	return nil
}

// PaceHistory returns key's pace points in [from, to], oldest first.
func PaceHistory(ctx context.Context, db DBTX, key string, from, to time.Time) ([]PacePoint, error) {
	rows, err := db.Query(ctx, `SELECT key, at, source, rate_per_s, limit_per_s FROM triage_pace_history
		WHERE key = $1 AND at >= $2 AND at <= $3 ORDER BY at`, key, from, to)
	if err != nil {
		return nil, fmt.Errorf("ledger: pace history of key %q: %w", key, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[PacePoint])
	if err != nil {
		return nil, fmt.Errorf("ledger: pace history of key %q: %w", key, err)
	}
	return out, nil
}
