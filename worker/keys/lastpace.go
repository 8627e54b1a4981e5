package keys

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
	var (
		lp     LastPace
		source string
		req    *float64
		tok    *float64
	)
	err := s.pool.QueryRow(ctx, `SELECT source, req_rate, tok_rate, updated_at FROM triage_pacer
		WHERE key = $1 ORDER BY updated_at DESC LIMIT 1`, key).Scan(&source, &req, &tok, &lp.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return LastPace{}, false, nil
	}
	if err != nil {
		return LastPace{}, false, fmt.Errorf("keys: last pace of %s: %w", key, err)
	}
	lp.Source = PaceSource(source)
	if req != nil {
		lp.RatePerS = *req
	}
	if tok != nil {
		lp.TokensPerS = *tok
	}
	return lp, true, nil
}
