package keys

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// KeyStatus is what `triage keys` shows about one key.
type KeyStatus struct {
	Key        string     `json:"key"`
	State      State      `json:"state"`
	Generation int64      `json:"generation"`
	Reason     string     `json:"reason,omitempty"`
	OpenedAt   *time.Time `json:"opened_at,omitempty"`
	// NextProbe is when the next probe may go (open).
	NextProbe *time.Time `json:"next_probe,omitempty"`
	// ProbeLeaseUntil is when the live probe claim lapses (half-open).
	ProbeLeaseUntil *time.Time `json:"probe_lease_until,omitempty"`
	// ProbeJobID is the River job holding or dispatched for the probe.
	ProbeJobID int64 `json:"probe_job_id,omitempty"`
	// Hold is the safety net's hold (the exhausted breaker opened by a
	// rejection streak or a throttle wall, not by an exhausted answer);
	// nil when none.
	Hold *Hold `json:"hold,omitempty"`
	// Pause is the active pause, nil if none.
	Pause *Pause `json:"pause,omitempty"`
	// Storm is the storm breaker; the fields above are the exhausted
	// breaker's.
	Storm StormStatus `json:"storm"`
	// Now is the time the status was read at (the Clock's or the database's).
	Now time.Time `json:"now"`
}

// StormStatus is the storm breaker's part of KeyStatus.
type StormStatus struct {
	State      State      `json:"state"`
	Generation int64      `json:"generation"`
	Reason     string     `json:"reason,omitempty"`
	OpenedAt   *time.Time `json:"opened_at,omitempty"`
	// NextProbe is when the next probe may go (open).
	NextProbe *time.Time `json:"next_probe,omitempty"`
	// ProbeLeaseUntil is when the live probe claim lapses (half-open).
	ProbeLeaseUntil *time.Time `json:"probe_lease_until,omitempty"`
	ProbeJobID      int64      `json:"probe_job_id,omitempty"`
	// CooldownS is the wait before the next probe, in seconds: it doubles
	// with every failed probe up to the key's storm_probe_max.
	CooldownS float64 `json:"cooldown_s,omitempty"`
}

// Paused reports whether the key's River queue should not be fetched from:
// an active pause, or a breaker that is not closed.
func (k *KeyStatus) Paused() bool {
	return k.Pause != nil || k.State != StateClosed || k.Storm.State != StateClosed
}

const statusSQL = `
WITH now AS (SELECT coalesce($1::timestamptz, now()) AS t),
k AS (SELECT key FROM triage_key_state UNION SELECT key FROM triage_storm_state UNION SELECT key FROM triage_pause)
SELECT k.key, coalesce(s.state, 'closed'), coalesce(s.generation, 0), coalesce(s.reason, ''),
       s.opened_at, s.probe_at, s.probe_lease_until, coalesce(s.probe_job_id, 0),
       p.key IS NOT NULL AND p.until > now.t, coalesce(p.reason, ''), p.until, coalesce(p.set_by, ''), p.created_at,
       now.t,
       coalesce(st.state, 'closed'), coalesce(st.generation, 0), coalesce(st.reason, ''),
       st.opened_at, st.probe_at, st.probe_lease_until, coalesce(st.probe_job_id, 0), coalesce(st.cooldown_ms, 0)
FROM k
LEFT JOIN triage_key_state s ON s.key = k.key
LEFT JOIN triage_storm_state st ON st.key = k.key
LEFT JOIN triage_pause p ON p.key = k.key
CROSS JOIN now
`

func scanStatus(row pgx.Row) (*KeyStatus, error) {
	var (
		st       KeyStatus
		paused   bool
		p        Pause
		until    *time.Time
		pCreated *time.Time
		coolMS   int64
	)
	if err := row.Scan(&st.Key, &st.State, &st.Generation, &st.Reason, &st.OpenedAt, &st.NextProbe,
		&st.ProbeLeaseUntil, &st.ProbeJobID, &paused, &p.Reason, &until, &p.SetBy, &pCreated, &st.Now,
		&st.Storm.State, &st.Storm.Generation, &st.Storm.Reason, &st.Storm.OpenedAt, &st.Storm.NextProbe,
		&st.Storm.ProbeLeaseUntil, &st.Storm.ProbeJobID, &coolMS); err != nil {
		return nil, err
	}
	if st.State != StateHalfOpen {
		st.ProbeLeaseUntil = nil
	}
	if st.State != StateClosed {
		st.Hold = ParseHold(st.Reason)
	}
	if st.Storm.State != StateHalfOpen {
		st.Storm.ProbeLeaseUntil = nil
	}
	if st.Storm.State != StateClosed {
		st.Storm.CooldownS = float64(coolMS) / 1000
	}
	if paused {
		p.Key, p.Until, p.CreatedAt = st.Key, *until, *pCreated
		st.Pause = &p
	}
	return &st, nil
}

// KeyStatus returns key's breaker and pause. A key never seen is closed.
func (s *Store) KeyStatus(ctx context.Context, key string) (*KeyStatus, error) {
	st, err := scanStatus(s.pool.QueryRow(ctx, statusSQL+`WHERE k.key = $2`, s.nowParam(), key))
	if errors.Is(err, pgx.ErrNoRows) {
		var now time.Time
		if err := s.pool.QueryRow(ctx, `SELECT coalesce($1::timestamptz, now())`, s.nowParam()).Scan(&now); err != nil {
			return nil, fmt.Errorf("keys: status %s: %w", key, err)
		}
		return &KeyStatus{Key: key, State: StateClosed, Storm: StormStatus{State: StateClosed}, Now: now}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("keys: status %s: %w", key, err)
	}
	return st, nil
}

// ListKeyStatus returns the status of every key that has breaker or pause
// state, by key. Keys never tripped nor paused are closed and not listed.
func (s *Store) ListKeyStatus(ctx context.Context) ([]KeyStatus, error) {
	rows, err := s.pool.Query(ctx, statusSQL+`ORDER BY 1`, s.nowParam())
	if err != nil {
		return nil, fmt.Errorf("keys: list status: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (KeyStatus, error) {
		st, err := scanStatus(r)
		if err != nil {
			return KeyStatus{}, err
		}
		return *st, nil
	})
	if err != nil {
		return nil, fmt.Errorf("keys: list status: %w", err)
	}
	return out, nil
}
