package keys

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/triage-dev/triage/worker/decide"
)

// Defaults for PacersConfig.
const (
	// PacerHeartbeatDefault is how often a process renews its heartbeat rows
	// and merges what its peers learned.
	PacerHeartbeatDefault = time.Second
	// PacerTTLFactor: a heartbeat row counts for this many heartbeats after
	// it was written, so a process that died stops counting within seconds
	// while one slow heartbeat does not drop a live process.
	PacerTTLFactor = 3
)

// PacerPeers is what a heartbeat learned about a key's other live
// processes.
type PacerPeers struct {
	// Live is the processes with a live heartbeat, this one included.
	Live int
	// ThrottleRate is the lowest fleet rate among peers learning from
	// throttles (0: none).
	ThrottleRate float64
	// HeaderReqRate and HeaderTokRate are the headers' limits per second
	// a peer saw (0: none); HeaderFactor the lowest share of them in use.
	HeaderReqRate, HeaderTokRate, HeaderFactor float64
	// StartingRate is the highest rate among peers still looking for the
	// limit (0: none).
	StartingRate float64
	// AcceptedRate is the peers' accepted requests per second, summed.
	AcceptedRate float64
}

func nullIfZero(f float64) *float64 {
	if f <= 0 {
		return nil
	}
	return &f
}

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

// PacerHeartbeat renews owner's heartbeat for key (live for ttl), stores
// what its pacer knows and returns what the other live processes know, in
// one statement. Rows expired long ago are deleted on the way.
func (s *Store) PacerHeartbeat(ctx context.Context, key, owner string, st PaceState, ttl time.Duration) (PacerPeers, error) {
	if err := checkKey(key); err != nil {
		return PacerPeers{}, err
	}
	var headersAt *time.Time
	if !st.HeadersAt.IsZero() {
		headersAt = &st.HeadersAt
	}
	tw := st.Headers.TokenWindow()
	limReq, remReq := windowCols(st.Headers.Requests.Limit, st.Headers.Requests.Remaining)
	limTok, remTok := windowCols(tw.Limit, tw.Remaining)
	var p PacerPeers
	var throttleRate, hReq, hTok, hFactor, starting, accepted *float64
	err := s.pool.QueryRow(ctx, `
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
		s.nowParam(), key, owner, string(st.Source), nullIfZero(st.FleetRate), nullIfZero(st.FleetTokens), st.Factor,
		nullIfZero(st.ReqLimit), nullIfZero(st.TokLimit), limReq, remReq, limTok, remTok, headersAt, st.Throttles,
		ttl.Microseconds(), st.AcceptedRate).Scan(&p.Live, &throttleRate, &hReq, &hTok, &hFactor, &starting, &accepted)
	if err != nil {
		return PacerPeers{}, fmt.Errorf("keys: pacer heartbeat %s: %w", key, err)
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
func (s *Store) PacerLeave(ctx context.Context, owner string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM triage_pacer WHERE owner = $1`, owner); err != nil {
		return fmt.Errorf("keys: pacer leave: %w", err)
	}
	return nil
}

// PacingStatus is a key's pacing as the fleet's heartbeat rows tell it, for
// `triage keys`.
type PacingStatus struct {
	Key string
	// Live is the processes with a live heartbeat on the key.
	Live int
	// Source is how the rate was learned: headers, throttles or starting
	// (the most informed live process's).
	Source PaceSource
	// RatePerS and TokensPerS are the fleet-wide rates the processes pace
	// at (the lowest among them; 0: not limited); ShareRatePerS is
	// RatePerS / Live.
	RatePerS, TokensPerS, ShareRatePerS float64
	// The last rate-limit headers any live process saw, at HeadersAt; nil:
	// none.
	LimitRequests, RemainingRequests, LimitTokens, RemainingTokens *int64
	HeadersAt                                                      *time.Time
	Throttles                                                      int64
}

// ListPacing returns the pacing of every key with a live heartbeat, by key.
func (s *Store) ListPacing(ctx context.Context) ([]PacingStatus, error) {
	rows, err := s.pool.Query(ctx, `
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
FROM agg LEFT JOIN hdr ON hdr.key = agg.key ORDER BY agg.key`, s.nowParam())
	if err != nil {
		return nil, fmt.Errorf("keys: list pacing: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PacingStatus, error) {
		var ps PacingStatus
		var source string
		err := r.Scan(&ps.Key, &ps.Live, &source, &ps.RatePerS, &ps.TokensPerS, &ps.Throttles,
			&ps.LimitRequests, &ps.RemainingRequests, &ps.LimitTokens, &ps.RemainingTokens, &ps.HeadersAt)
		ps.Source = PaceSource(source)
		if ps.Live > 0 {
			ps.ShareRatePerS = ps.RatePerS / float64(ps.Live)
		}
		return ps, err
	})
	if err != nil {
		return nil, fmt.Errorf("keys: list pacing: %w", err)
	}
	return out, nil
}

// PacersConfig configures a Pacers service.
type PacersConfig struct {
	// Owner names this process's heartbeat rows; it must differ between
	// processes (and between Runtimes in one process). Default: the Store's
	// owner plus a random suffix.
	Owner string
	// Heartbeat: see PacerHeartbeatDefault.
	Heartbeat time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Record, when set, is given a paced key's state (FleetRate above 0)
	// at most once per RecordEvery, after its heartbeat: the pace history
	// (the worker writes ledger.RecordPace). An error is logged and tried
	// again at the next heartbeat. Default nil: nothing recorded.
	Record func(ctx context.Context, key string, st PaceState) error
	// RecordEvery: see Record. Default PaceRecordEveryDefault.
	RecordEvery time.Duration
}

// PaceRecordEveryDefault is PacersConfig.RecordEvery's default, the pace
// history's step.
const PaceRecordEveryDefault = 10 * time.Second

// Pacers keeps this process's Pacers in step with the fleet: every
// heartbeat it renews one row per key in triage_pacer and gives each Pacer
// the live process count and what the peers learned. It runs beside the
// call path, never on it.
type Pacers struct {
	store  *Store
	pacers map[string]*Pacer
	cfg    PacersConfig

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}

	// recorded is when each key's state was last given to cfg.Record.
	recMu    sync.Mutex
	recorded map[string]time.Time
}

// NewPacers returns the service for pacers (by key name).
func NewPacers(store *Store, pacers map[string]*Pacer, cfg PacersConfig) *Pacers {
	if cfg.Owner == "" {
		cfg.Owner = store.cfg.Owner + ":" + newToken()[:8]
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = PacerHeartbeatDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RecordEvery <= 0 {
		cfg.RecordEvery = PaceRecordEveryDefault
	}
	return &Pacers{store: store, pacers: pacers, cfg: cfg, recorded: map[string]time.Time{}}
}

// Owner is the name of this process's heartbeat rows.
func (ps *Pacers) Owner() string { return ps.cfg.Owner }

// Sync renews every key's heartbeat once and merges the peers' state.
func (ps *Pacers) Sync(ctx context.Context) error {
	ttl := PacerTTLFactor * ps.cfg.Heartbeat
	var first error
	for key, p := range ps.pacers {
		peers, err := ps.store.PacerHeartbeat(ctx, key, ps.cfg.Owner, p.State(), ttl)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		p.adopt(peers)
		ps.record(ctx, key, p)
	}
	return first
}

// record gives key's state to cfg.Record when a step has passed since the
// last time and the key is paced.
func (ps *Pacers) record(ctx context.Context, key string, p *Pacer) {
	if ps.cfg.Record == nil {
		return
	}
	now := p.now()
	ps.recMu.Lock()
	last, ok := ps.recorded[key]
	ps.recMu.Unlock()
	if ok && now.Sub(last) < ps.cfg.RecordEvery {
		return
	}
	st := p.State()
	if st.FleetRate <= 0 {
		return
	}
	if err := ps.cfg.Record(ctx, key, st); err != nil {
		ps.cfg.Logger.WarnContext(ctx, "pace history not recorded", "key", key, "err", err)
		return
	}
	ps.recMu.Lock()
	ps.recorded[key] = now
	ps.recMu.Unlock()
}

// Start syncs once, so that the fleet counts this process before it makes
// a call, then keeps syncing every heartbeat until Stop.
func (ps *Pacers) Start(ctx context.Context) error {
	if err := ps.Sync(ctx); err != nil {
		return err
	}
	// The processes already running learn of this one only at their next
	// heartbeat and pace at their old share until then: a newcomer holds
	// its calls for that long, so that a second process never doubles the
	// load, not even for a second.
	at := time.Now()
	for _, p := range ps.pacers {
		if p.State().Live > 1 {
			p.Observe(PaceOutcome{At: at, Hold: at.Add(ps.cfg.Heartbeat + ps.cfg.Heartbeat/5)})
		}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ps.mu.Lock()
	ps.cancel, ps.done = cancel, make(chan struct{})
	done := ps.done
	ps.mu.Unlock()
	go func() {
		defer close(done)
		for {
			// A little jitter keeps a fleet's heartbeats from lining up.
			d := decide.Jitter(ps.cfg.Heartbeat, 0.9, 1.1)
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
			if err := ps.Sync(ctx); err != nil && ctx.Err() == nil {
				ps.cfg.Logger.WarnContext(ctx, "pacer heartbeat", "err", err)
			}
		}
	}()
	return nil
}

// Stop ends the heartbeats and deletes this process's rows, so the other
// processes take up its share at their next heartbeat.
func (ps *Pacers) Stop(ctx context.Context) {
	ps.mu.Lock()
	cancel, done := ps.cancel, ps.done
	ps.cancel = nil
	ps.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	if err := ps.store.PacerLeave(ctx, ps.cfg.Owner); err != nil {
		ps.cfg.Logger.WarnContext(ctx, "pacer leave", "err", err)
	}
}

// Crash ends the heartbeats without deleting the rows, as a process that
// dies does: its share returns to the others only when its rows expire.
// For tests and benchmarks.
func (ps *Pacers) Crash() {
	ps.mu.Lock()
	cancel, done := ps.cancel, ps.done
	ps.cancel = nil
	ps.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
