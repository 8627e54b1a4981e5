package keys

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/triage-dev/triage/ledger"
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
// processes (ledger.PacerHeartbeat).
type PacerPeers = ledger.PacerPeers

// PacerHeartbeat renews owner's heartbeat for key (live for ttl), stores
// what its pacer knows and returns what the other live processes know, in
// one statement. Rows expired long ago are deleted on the way.
func (s *Store) PacerHeartbeat(ctx context.Context, key, owner string, st PaceState, ttl time.Duration) (PacerPeers, error) {
	if err := checkKey(key); err != nil {
		return PacerPeers{}, err
	}
	tw := st.Headers.TokenWindow()
	p, err := ledger.PacerHeartbeat(ctx, s.pool, ledger.PacerBeat{
		Key: key, Owner: owner, Source: string(st.Source),
		ReqRate: st.FleetRate, TokRate: st.FleetTokens, Factor: st.Factor,
		HeaderReqRate: st.ReqLimit, HeaderTokRate: st.TokLimit,
		LimitRequests: st.Headers.Requests.Limit, RemainingRequests: st.Headers.Requests.Remaining,
		LimitTokens: tw.Limit, RemainingTokens: tw.Remaining, HeadersAt: st.HeadersAt,
		Throttles: st.Throttles, AcceptedRate: st.AcceptedRate, TTL: ttl, Now: s.now(),
	})
	if err != nil {
		return PacerPeers{}, fmt.Errorf("keys: pacer heartbeat %s: %w", key, err)
	}
	return p, nil
}

// PacerLeave deletes owner's heartbeat rows, so its share goes to the
// others at their next heartbeat instead of when the rows expire.
func (s *Store) PacerLeave(ctx context.Context, owner string) error {
	if err := ledger.PacerLeave(ctx, s.pool, owner); err != nil {
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
	rows, err := ledger.ListKeyPacing(ctx, s.pool, s.now())
	if err != nil {
		return nil, fmt.Errorf("keys: list pacing: %w", err)
	}
	out := make([]PacingStatus, len(rows))
	for i, r := range rows {
		ps := PacingStatus{Key: r.Key, Live: r.Live, Source: PaceSource(r.Source), RatePerS: r.RatePerS, TokensPerS: r.TokensPerS,
			LimitRequests: r.LimitRequests, RemainingRequests: r.RemainingRequests, LimitTokens: r.LimitTokens,
			RemainingTokens: r.RemainingTokens, HeadersAt: r.HeadersAt, Throttles: r.Throttles}
		if ps.Live > 0 {
			ps.ShareRatePerS = ps.RatePerS / float64(ps.Live)
		}
		out[i] = ps
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

// Validate refuses a negative Heartbeat or RecordEvery.
func (c PacersConfig) Validate() error {
	return notNegative("PacersConfig", setting{"Heartbeat", c.Heartbeat}, setting{"RecordEvery", c.RecordEvery})
}

// WithDefaults returns c with its zero fields set to the defaults, but for
// Owner, which NewPacers derives from its Store's.
func (c PacersConfig) WithDefaults() PacersConfig {
	if c.Heartbeat == 0 {
		c.Heartbeat = PacerHeartbeatDefault
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RecordEvery == 0 {
		c.RecordEvery = PaceRecordEveryDefault
	}
	return c
}

// NewPacers returns the service for pacers (by key name). A cfg that
// Validate refuses is its error.
func NewPacers(store *Store, pacers map[string]*Pacer, cfg PacersConfig) (*Pacers, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if cfg.Owner == "" {
		cfg.Owner = store.cfg.Owner + ":" + newToken()[:8]
	}
	return &Pacers{store: store, pacers: pacers, cfg: cfg, recorded: map[string]time.Time{}}, nil
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
