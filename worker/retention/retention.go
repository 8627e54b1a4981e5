// Package retention is the background service that prunes the ledger's
// rows of finished work (ledger.Prune): collected provider batches and
// their lines, alerts, requeued dead letters, the request bodies of
// closed batch lines, and the failed calls that billed nothing of records
// answered long ago. Every `triage work` process runs one; a session
// advisory lock lets one at a time do a pass, the others skip it.
package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/service"
)

// Config configures a Service.
type Config struct {
	// Pool reaches the ledger. Required.
	Pool *pgxpool.Pool
	// Age: alerts, provider batches (with their lines) and failed
	// attempts that ended longer ago are pruned. Required (config.Retention.Age).
	Age time.Duration
	// DeadLetterAge: dead letters requeued longer ago are pruned.
	// Required (config.Retention.DeadLetterAge).
	DeadLetterAge time.Duration
	// Interval between passes, jittered by up to a tenth. Default
	// IntervalDefault.
	Interval time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock cutoffs are counted from. Default time.Now.
	Now func() time.Time
}

// IntervalDefault is Config.Interval's default.
const IntervalDefault = time.Hour

// Result is what one pass did.
type Result struct {
	// Ran is false when another process held the lock (nothing done).
	Ran    bool
	Pruned ledger.Pruned
}

// TestSignals lets tests wait for a pass: when Passes is set, each pass's
// Result is sent on it (dropped when nobody receives).
type TestSignals struct {
	Passes chan Result
}

// Service prunes on a timer until stopped.
type Service struct {
	cfg         Config
	TestSignals TestSignals
	loop        service.Loop
}

// New returns a stopped service with cfg's defaults filled in.
func New(cfg Config) *Service {
	if cfg.Interval <= 0 {
		cfg.Interval = IntervalDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg}
}

// Start runs a pass at once, then one every Interval, until Stop.
func (s *Service) Start(ctx context.Context) {
	s.loop.Start(ctx, s.cfg.Interval, 1, 1.1, func(ctx context.Context) {
		res, err := s.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "retention pass", "err", err)
		}
		service.Signal(s.TestSignals.Passes, res)
	})
}

// Stop ends the loop and waits for a pass in progress to stop (its
// current chunk is rolled back or committed whole).
func (s *Service) Stop() { s.loop.Stop() }

// RunOnce takes the fleet's prune lock and, when it gets it, runs one pass.
func (s *Service) RunOnce(ctx context.Context) (Result, error) {
	conn, err := s.cfg.Pool.Acquire(ctx)
	if err != nil {
		return Result{}, err
	}
	defer conn.Release()
	mine, err := ledger.TryPruneLock(ctx, conn)
	if err != nil || !mine {
		return Result{}, err
	}
	defer func() {
		unlock, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := ledger.PruneUnlock(unlock, conn); err != nil {
			// A lock that cannot be released goes with the connection.
			conn.Conn().Close(unlock) //nolint:errcheck
		}
	}()
	now := s.cfg.Now()
	p, err := ledger.Prune(ctx, conn, ledger.PruneCutoffs{
		Finished: now.Add(-s.cfg.Age), Requeued: now.Add(-s.cfg.DeadLetterAge), Now: now,
	})
	res := Result{Ran: true, Pruned: p}
	if p.Total() > 0 {
		s.cfg.Logger.InfoContext(ctx, "retention pruned finished work",
			"stripped_lines", p.Stripped, "provider_batches", p.ProviderBatches, "lines", p.Lines,
			"alerts", p.Alerts, "dead_letters", p.DeadLetters, "pace_history", p.PaceHistory, "attempts", p.Attempts)
	}
	return res, err
}
