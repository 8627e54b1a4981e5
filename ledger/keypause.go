package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// KeyPause is a key's pause (triage_pause, at most one row per key): its
// River queue is not fetched from until Until.
type KeyPause struct {
	Key       string
	Reason    string
	Until     time.Time
	SetBy     string
	CreatedAt time.Time
}

const keyPauseColumns = `key, reason, until, set_by, created_at`

func scanKeyPause(row pgx.Row) (KeyPause, error) {
	var p KeyPause
	err := row.Scan(&p.Key, &p.Reason, &p.Until, &p.SetBy, &p.CreatedAt)
	return p, err
}

// PauseKey pauses key until until, or, when until is nil, for d from now
// (now: the database's clock when zero, so a fleet whose machines' clocks
// disagree still agrees on when a pause ends). setBy names the process.
//
// A pause is only ever extended, never shortened: an active pause ends at
// the later of the two, with the reason and setter of whichever ends later;
// a pause that had ended starts again at now.
func PauseKey(ctx context.Context, db DBTX, key, reason string, until *time.Time, d time.Duration, setBy string, now time.Time) (KeyPause, error) {
	p, err := scanKeyPause(db.QueryRow(ctx, `
WITH now AS (SELECT coalesce($5::timestamptz, now()) AS t)
INSERT INTO triage_pause AS p (key, reason, until, set_by, created_at, updated_at)
SELECT $1, $2, coalesce($3::timestamptz, now.t + $6::bigint * interval '1 microsecond'), $4, now.t, now.t FROM now
ON CONFLICT (key) DO UPDATE SET
    reason     = CASE WHEN EXCLUDED.until > p.until THEN EXCLUDED.reason ELSE p.reason END,
    set_by     = CASE WHEN EXCLUDED.until > p.until THEN EXCLUDED.set_by ELSE p.set_by END,
    created_at = CASE WHEN p.until <= EXCLUDED.created_at THEN EXCLUDED.created_at ELSE p.created_at END,
    until      = greatest(p.until, EXCLUDED.until),
    updated_at = EXCLUDED.updated_at
RETURNING `+keyPauseColumns, key, reason, until, setBy, nowArg(now), d.Microseconds()))
	if err != nil {
		return KeyPause{}, fmt.Errorf("ledger: pause key %q: %w", key, err)
	}
	return p, nil
}

// EndKeyPause ends key's active pause at now (the manual resume). A pause
// that has ended already is left as it is.
func EndKeyPause(ctx context.Context, db DBTX, key string, now time.Time) error {
	if _, err := db.Exec(ctx, `UPDATE triage_pause SET until = $2, updated_at = $2 WHERE key = $1 AND until > $2`, key, now); err != nil {
		return fmt.Errorf("ledger: end pause of key %q: %w", key, err)
	}
	return nil
}

// ActiveKeyPause returns key's pause if it has not ended at now (the
// database's clock when zero); ok false when none.
func ActiveKeyPause(ctx context.Context, db DBTX, key string, now time.Time) (p KeyPause, ok bool, err error) {
	p, err = scanKeyPause(db.QueryRow(ctx, `
SELECT `+keyPauseColumns+` FROM triage_pause WHERE key = $1 AND until > coalesce($2::timestamptz, now())`,
		key, nowArg(now)))
	if errors.Is(err, pgx.ErrNoRows) {
		return KeyPause{}, false, nil
	}
	if err != nil {
		return KeyPause{}, false, fmt.Errorf("ledger: active pause of key %q: %w", key, err)
	}
	return p, true, nil
}

// KeyPaused reports whether key has a pause that has not ended at now.
func KeyPaused(ctx context.Context, db DBTX, key string, now time.Time) (bool, error) {
	var paused bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM triage_pause WHERE key = $1 AND until > $2)`, key, now).Scan(&paused); err != nil {
		return false, fmt.Errorf("ledger: pause of key %q: %w", key, err)
	}
	return paused, nil
}

// ListKeyPauses returns the pauses that have not ended at now (the
// database's clock when zero), by key.
func ListKeyPauses(ctx context.Context, db DBTX, now time.Time) ([]KeyPause, error) {
	rows, err := db.Query(ctx, `
SELECT `+keyPauseColumns+` FROM triage_pause WHERE until > coalesce($1::timestamptz, now()) ORDER BY key`,
		nowArg(now))
	if err != nil {
		return nil, fmt.Errorf("ledger: list key pauses: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (KeyPause, error) { return scanKeyPause(r) })
	if err != nil {
		return nil, fmt.Errorf("ledger: list key pauses: %w", err)
	}
	return out, nil
}
