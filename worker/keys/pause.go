package keys

import (
	"context"
	"fmt"
	"time"

	"github.com/triage-dev/triage/ledger"
)

// Pause reasons in use; any short slug is accepted.
const (
	PauseThrottled = "throttled"
	PauseExhausted = "exhausted"
)

// Pause is a key's pause: its River queue is not fetched from until Until.
// Its fields are ledger.KeyPause's, which stores it.
type Pause struct {
	Key       string    `json:"key"`
	Reason    string    `json:"reason"`
	Until     time.Time `json:"until"`
	SetBy     string    `json:"set_by"`
	CreatedAt time.Time `json:"created_at"`
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
	p, err := ledger.PauseKey(ctx, s.pool, key, reason, until, d, s.cfg.Owner, s.now())
	if err != nil {
		return nil, fmt.Errorf("keys: pause %s: %w", key, err)
	}
	out := Pause(p)
	return &out, nil
}

// ActivePause returns key's pause if it has not ended yet, else nil.
func (s *Store) ActivePause(ctx context.Context, key string) (*Pause, error) {
	p, ok, err := ledger.ActiveKeyPause(ctx, s.pool, key, s.now())
	if err != nil {
		return nil, fmt.Errorf("keys: active pause %s: %w", key, err)
	}
	if !ok {
		return nil, nil
	}
	out := Pause(p)
	return &out, nil
}

// ListPauses returns the active pauses of all keys, by key.
func (s *Store) ListPauses(ctx context.Context) ([]Pause, error) {
	ps, err := ledger.ListKeyPauses(ctx, s.pool, s.now())
	if err != nil {
		return nil, fmt.Errorf("keys: list pauses: %w", err)
	}
	out := make([]Pause, len(ps))
	for i, p := range ps {
		out[i] = Pause(p)
	}
	return out, nil
}
