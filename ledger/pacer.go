package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PacerBeat is what one process's pacer knows of a key, written as its
// heartbeat row (triage_pacer, one row per key and process). A zero rate
// or limit is stored as NULL (not known).
type PacerBeat struct {
	Key, Owner string
	// Source is how the rate was learned (keys.PaceSource).
	Source string
	// ReqRate and TokRate are the fleet-wide rates the process paces at.
	ReqRate, TokRate float64
	Factor           float64
	// HeaderReqRate and HeaderTokRate are the headers' limits per second.
	HeaderReqRate, HeaderTokRate float64
	// The last rate-limit windows the provider sent, at HeadersAt (zero:
	// none). A limit of 0 or less is none; a remaining below 0 unknown.
	LimitRequests, RemainingRequests, LimitTokens, RemainingTokens int64
	HeadersAt                                                      time.Time
	Throttles                                                      int
	AcceptedRate                                                   float64
	// TTL is how long the row counts as live.
	TTL time.Duration
	// Now pins the time; zero: the database's clock.
	Now time.Time
}

// PacerPeers is what a heartbeat read of a key's other live processes.
type PacerPeers struct {
	// Live is the processes with a live heartbeat, the writer included.
	Live int
	// ThrottleRate is the lowest rate among peers learning from throttles
	// (0: none).
	ThrottleRate float64
	// HeaderReqRate and HeaderTokRate are the highest headers' limits per
	// second a peer saw (0: none); HeaderFactor the lowest share of them in
	// use.
	HeaderReqRate, HeaderTokRate, HeaderFactor float64
	// StartingRate is the highest rate among peers still looking for the
	// limit (0: none).
	StartingRate float64
	// AcceptedRate is the peers' accepted requests per second, summed.
	AcceptedRate float64
}

func nullIfNotPositive(f float64) *float64 {
	if f <= 0 {
		return nil
	}
	return &f
}

// windowCols maps a rate-limit window to its columns: no limit is NULL
// for both, an unknown remaining NULL for it.
func windowCols(limit, remaining int64) (*int64, *int64) {
	if limit <= 0 {
		return nil, nil
	}
	l := limit
	if remaining < 0 {
		return &l, nil
	}
	r := remaining
	return &l, &r
}

// PacerHeartbeat writes b as its owner's live heartbeat for its key and
// returns what the key's other live processes wrote, in one statement. Rows
// that expired more than ten minutes ago are deleted on the way.
func PacerHeartbeat(ctx context.Context, db DBTX, b PacerBeat) (PacerPeers, error) {
	var headersAt *time.Time
	if !b.HeadersAt.IsZero() {
		headersAt = &b.HeadersAt
	}
	limReq, remReq := windowCols(b.LimitRequests, b.RemainingRequests)
	limTok, remTok := windowCols(b.LimitTokens, b.RemainingTokens)
	var p PacerPeers
	var throttleRate, hReq, hTok, hFactor, starting, accepted *float64
	err := db.QueryRow(ctx, `
WITH now AS (SELECT coalesce($1::timestamptz, now()) AS t),
gc AS (
    DELETE FROM triage_pacer USING now WHERE key = $2 AND expires_at < now.t - interval '10 minutes'
),
up AS (
    INSERT INTO triage_pacer AS p (key, owner, source, req_rate, tok_rate, factor, header_req_rate, header_tok_rate,
        limit_requests, remaining_requests, limit_tokens, remaining_tokens, headers_at, throttles, accepted_rate, expires_at, updated_at)
    SELECT $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $17, now.t + $16::bigint * interval '1 microsecond', now.t FROM now
    ON CONFLICT (key, owner) DO UPDATE SET
        source = EXCLUDED.source, req_rate = EXCLUDED.req_rate, tok_rate = EXCLUDED.tok_rate, factor = EXCLUDED.factor,
        header_req_rate = EXCLUDED.header_req_rate, header_tok_rate = EXCLUDED.header_tok_rate,
        limit_requests = EXCLUDED.limit_requests, remaining_requests = EXCLUDED.remaining_requests,
        limit_tokens = EXCLUDED.limit_tokens, remaining_tokens = EXCLUDED.remaining_tokens,
        headers_at = EXCLUDED.headers_at, throttles = EXCLUDED.throttles, accepted_rate = EXCLUDED.accepted_rate,
        expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at
    RETURNING 1
)
SELECT 1 + count(*),
       min(req_rate) FILTER (WHERE source = 'throttles'),
       max(header_req_rate), max(header_tok_rate),
       min(factor) FILTER (WHERE source IN ('headers', 'configured')),
       max(req_rate) FILTER (WHERE source = 'starting'),
       sum(accepted_rate)
FROM triage_pacer, now
WHERE key = $2 AND owner <> $3 AND expires_at > now.t`,
		nowArg(b.Now), b.Key, b.Owner, b.Source, nullIfNotPositive(b.ReqRate), nullIfNotPositive(b.TokRate), b.Factor,
		nullIfNotPositive(b.HeaderReqRate), nullIfNotPositive(b.HeaderTokRate), limReq, remReq, limTok, remTok, headersAt, b.Throttles,
		b.TTL.Microseconds(), b.AcceptedRate).Scan(&p.Live, &throttleRate, &hReq, &hTok, &hFactor, &starting, &accepted)
	if err != nil {
		return PacerPeers{}, fmt.Errorf("ledger: pacer heartbeat of key %q: %w", b.Key, err)
	}
	for _, f := range []struct {
		dst *float64
		src *float64
	}{{&p.ThrottleRate, throttleRate}, {&p.HeaderReqRate, hReq}, {&p.HeaderTokRate, hTok}, {&p.HeaderFactor, hFactor}, {&p.StartingRate, starting}, {&p.AcceptedRate, accepted}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
	return p, nil
}

// PacerLeave deletes owner's heartbeat rows, so its share goes to the
// others at their next heartbeat instead of when the rows expire.
func PacerLeave(ctx context.Context, db DBTX, owner string) error {
	if _, err := db.Exec(ctx, `DELETE FROM triage_pacer WHERE owner = $1`, owner); err != nil {
		return fmt.Errorf("ledger: pacer leave: %w", err)
	}
	return nil
}

// KeyPacing is a key's pacing as its live heartbeat rows tell it.
type KeyPacing struct {
	Key string
	// Live is the processes with a live heartbeat on the key.
	Live int
	// Source: headers if any live process learned from them, else
	// configured, throttles, starting.
	Source string
	// RatePerS and TokensPerS are the lowest fleet-wide rates among the
	// processes (0: not limited).
	RatePerS, TokensPerS float64
	// Throttles is the live processes' throttles, summed.
	Throttles int64
	// The last rate-limit headers any live process saw, at HeadersAt; nil:
	// none. (The fields are in the statement's column order.)
	LimitRequests, RemainingRequests, LimitTokens, RemainingTokens *int64
	HeadersAt                                                      *time.Time
}

// ListKeyPacing returns the pacing of every key with a live heartbeat at
// now (the database's clock when zero), by key.
func ListKeyPacing(ctx context.Context, db DBTX, now time.Time) ([]KeyPacing, error) {
	rows, err := db.Query(ctx, `
WITH now AS (SELECT coalesce($1::timestamptz, now()) AS t),
live AS (SELECT p.* FROM triage_pacer p, now WHERE p.expires_at > now.t),
agg AS (
    SELECT key, count(*) AS n,
           CASE WHEN bool_or(source = 'headers') THEN 'headers' WHEN bool_or(source = 'configured') THEN 'configured'
                WHEN bool_or(source = 'throttles') THEN 'throttles' ELSE 'starting' END AS source,
           coalesce(min(req_rate), 0) AS req_rate, coalesce(min(tok_rate), 0) AS tok_rate, sum(throttles) AS throttles
    FROM live GROUP BY key
),
hdr AS (
    SELECT DISTINCT ON (key) key, limit_requests, remaining_requests, limit_tokens, remaining_tokens, headers_at
    FROM live WHERE headers_at IS NOT NULL ORDER BY key, headers_at DESC
)
SELECT agg.key, agg.n, agg.source, agg.req_rate, agg.tok_rate, agg.throttles,
       hdr.limit_requests, hdr.remaining_requests, hdr.limit_tokens, hdr.remaining_tokens, hdr.headers_at
FROM agg LEFT JOIN hdr ON hdr.key = agg.key ORDER BY agg.key`, nowArg(now))
	if err != nil {
		return nil, fmt.Errorf("ledger: list key pacing: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[KeyPacing])
	if err != nil {
		return nil, fmt.Errorf("ledger: list key pacing: %w", err)
	}
	return out, nil
}

// LastPace is the pace the fleet last kept on a key, from its most recent
// heartbeat row, live or not.
type LastPace struct {
	Source string
	// RatePerS and TokensPerS: 0 when not limited.
	RatePerS, TokensPerS float64
	At                   time.Time
}

// LastPaceOf returns key's last pace; ok false when no process ever paced
// it on this database (or its rows were removed).
func LastPaceOf(ctx context.Context, db DBTX, key string) (LastPace, bool, error) {
	var (
		lp       LastPace
		req, tok *float64
	)
	err := db.QueryRow(ctx, `SELECT source, req_rate, tok_rate, updated_at FROM triage_pacer
		WHERE key = $1 ORDER BY updated_at DESC LIMIT 1`, key).Scan(&lp.Source, &req, &tok, &lp.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return LastPace{}, false, nil
	}
	if err != nil {
		return LastPace{}, false, fmt.Errorf("ledger: last pace of key %q: %w", key, err)
	}
	if req != nil {
		lp.RatePerS = *req
	}
	if tok != nil {
		lp.TokensPerS = *tok
	}
	return lp, true, nil
}
