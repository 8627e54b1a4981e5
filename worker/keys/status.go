package keys

import (
	"context"
	"fmt"
	"time"

	"github.com/triage-dev/triage/ledger"
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

// keyStatus is the status of the ledger's rows of one key.
func keyStatus(k ledger.KeyBreakers) KeyStatus {
	st := KeyStatus{Key: k.Key, State: State(k.Exhausted.State), Generation: k.Exhausted.Generation, Reason: k.Exhausted.Reason,
		OpenedAt: k.Exhausted.OpenedAt, NextProbe: k.Exhausted.ProbeAt, ProbeLeaseUntil: k.Exhausted.ProbeLeaseUntil,
		ProbeJobID: deref(k.Exhausted.ProbeJobID), Now: k.Now,
		Storm: StormStatus{State: State(k.Storm.State), Generation: k.Storm.Generation, Reason: k.Storm.Reason,
			OpenedAt: k.Storm.OpenedAt, NextProbe: k.Storm.ProbeAt, ProbeLeaseUntil: k.Storm.ProbeLeaseUntil,
			ProbeJobID: deref(k.Storm.ProbeJobID)}}
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
		st.Storm.CooldownS = float64(k.Storm.CooldownMS) / 1000
	}
	if k.Pause != nil {
		p := Pause(*k.Pause)
		st.Pause = &p
	}
	return st
}

// KeyStatus returns key's breaker and pause. A key never seen is closed.
func (s *Store) KeyStatus(ctx context.Context, key string) (*KeyStatus, error) {
	k, err := ledger.ReadKeyBreakers(ctx, s.pool, key, s.now())
	if err != nil {
		return nil, fmt.Errorf("keys: status %s: %w", key, err)
	}
	st := keyStatus(k)
	return &st, nil
}

// ListKeyStatus returns the status of every key that has breaker or pause
// state, by key. Keys never tripped nor paused are closed and not listed.
func (s *Store) ListKeyStatus(ctx context.Context) ([]KeyStatus, error) {
	ks, err := ledger.ListKeyBreakers(ctx, s.pool, s.now())
	if err != nil {
		return nil, fmt.Errorf("keys: list status: %w", err)
	}
	out := make([]KeyStatus, len(ks))
	for i, k := range ks {
		out[i] = keyStatus(k)
	}
	return out, nil
}
