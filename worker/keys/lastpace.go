package keys

import (
	"context"
	"fmt"
	"time"

	"github.com/triage-dev/triage/ledger"
)

// LastPace is the pace the fleet last kept on a key, from its most recent
// heartbeat row, live or not: what a `--dry-run` times a batch at.
type LastPace struct {
	Source PaceSource
	// RatePerS and TokensPerS are the fleet-wide requests and tokens per
	// second the key was paced at (0: not limited).
	RatePerS, TokensPerS float64
	At                   time.Time
}

// LastPaceOf returns the key's last pace; ok false when no process ever
// paced it on this database (or its rows were removed).
func (s *Store) LastPaceOf(ctx context.Context, key string) (LastPace, bool, error) {
	lp, ok, err := ledger.LastPaceOf(ctx, s.pool, key)
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("keys: last pace of %s: %w", key, err)
		}
		return LastPace{}, false, err
	}
	return LastPace{Source: PaceSource(lp.Source), RatePerS: lp.RatePerS, TokensPerS: lp.TokensPerS, At: lp.At}, true, nil
}
