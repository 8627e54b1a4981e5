package keys

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pause reasons in use; any short slug is accepted.
const (
	PauseThrottled = "throttled"
	PauseExhausted = "exhausted"
)

// Pause is a key's pause: its River queue is not fetched from until Until.
type Pause struct {
	Key       string    `json:"key"`
	Reason    string    `json:"reason"`
	Until     time.Time `json:"until"`
	SetBy     string    `json:"set_by"`
	CreatedAt time.Time `json:"created_at"`
}

const pauseColumns = `key, reason, until, set_by, created_at`

func scanPause(row pgx.Row) (*Pause, error) {
	var p Pause
	if err := row.Scan(&p.Key, &p.Reason, &p.Until, &p.SetBy, &p.CreatedAt); err != nil {
		return nil, err
	}
	return &p, nil
}

// Pause pauses key until until, fleet-wide. An active pause is extended,
// never shortened: the result ends at the later of the two, with the reason
// of whichever ends later. The River queue is paused by the Supervisors (or
// at once with Supervisor.Reconcile); it is resumed by them when the pause
// has passed, even if this process has died.
func (s *Store) Pause(ctx context.Context, key, reason string, until time.Time) (*Pause, error) {
	return s.pause(ctx, key, reason, &until, 0)
}

// PauseFor is Pause until d from now on the database's clock (or the
// Store's Clock), so that a fleet whose machines' clocks disagree still
// agrees on when a pause ends.
func (s *Store) PauseFor(ctx context.Context, key, reason string, d time.Duration) (*Pause, error) {
	return s.pause(ctx, key, reason, nil, d)
}

func (s *Store) pause(ctx context.Context, key, reason string, until *time.Time, d time.Duration) (*Pause, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	p, err := scanPause(s.pool.QueryRow(ctx, `
WITH now AS (SELECT coalesce($5::timestamptz, now()) AS t)
INSERT INTO triage_pause AS p (key, reason, until, set_by, created_at, updated_at)
SELECT $1, $2, coalesce($3::timestamptz, now.t + $6::bigint * interval '1 microsecond'), $4, now.t, now.t FROM now
ON CONFLICT (key) DO UPDATE SET
    reason     = CASE WHEN EXCLUDED.until > p.until THEN EXCLUDED.reason ELSE p.reason END,
    set_by     = CASE WHEN EXCLUDED.until > p.until THEN EXCLUDED.set_by ELSE p.set_by END,
    created_at = CASE WHEN p.until <= EXCLUDED.created_at THEN EXCLUDED.created_at ELSE p.created_at END,
    until      = greatest(p.until, EXCLUDED.until),
    updated_at = EXCLUDED.updated_at
RETURNING `+pauseColumns, key, reason, until, s.cfg.Owner, s.nowParam(), d.Microseconds()))
	if err != nil {
		return nil, fmt.Errorf("keys: pause %s: %w", key, err)
	}
	return p, nil
}

// ActivePause returns key's pause if it has not ended yet, else nil.
func (s *Store) ActivePause(ctx context.Context, key string) (*Pause, error) {
	p, err := scanPause(s.pool.QueryRow(ctx, `
SELECT `+pauseColumns+` FROM triage_pause WHERE key = $1 AND until > coalesce($2::timestamptz, now())`,
		key, s.nowParam()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("keys: active pause %s: %w", key, err)
	}
	return p, nil
}

// ListPauses returns the active pauses of all keys, by key.
func (s *Store) ListPauses(ctx context.Context) ([]Pause, error) {
	rows, err := s.pool.Query(ctx, `
SELECT `+pauseColumns+` FROM triage_pause WHERE until > coalesce($1::timestamptz, now()) ORDER BY key`,
		s.nowParam())
	if err != nil {
		return nil, fmt.Errorf("keys: list pauses: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Pause, error) {
		p, err := scanPause(r)
		if err != nil {
			return Pause{}, err
		}
		return *p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("keys: list pauses: %w", err)
	}
	return out, nil
}
