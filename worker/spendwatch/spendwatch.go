// Package spendwatch is the worker's spend loop: every SpendCheck it folds
// the spend counters (ledger.FoldSpend), raises the prepaid and spend-rate
// alerts of this process's keys from the ledger, runs the passes the worker
// gives it (the orphan sweep, worker/sweep; the left background responses,
// worker/leftresponses), deletes expired response-cache rows and announces
// the batches that settled (worker/settled). Every process runs it;
// ledger.ClaimOnce (keys.Alerter.AlertOnce) and ledger.ClaimSettled make
// each alert fire once for the fleet.
package spendwatch

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/service"
	"github.com/triage-dev/triage/worker/settled"
)

// Pass is a pass the watch runs on each check after its alerts, in the
// order given; tick counts the checks from 0.
type Pass func(ctx context.Context, tick int)

// Config is what a Watch works with. Pool, Config, Alerter and Every are
// required (Validate); Now and Logger have defaults (WithDefaults).
type Config struct {
	// Pool reaches triage's tables.
	Pool *pgxpool.Pool
	// Config holds [alerts] max_usd_per_hour.
	Config *config.Config
	// Keys are this process's keys: their prepaid balance and spend rate
	// are checked.
	Keys []*config.Key
	// Alerter raises the alerts.
	Alerter *keys.Alerter
	// Every is how often a check runs (the worker's SpendCheck), jittered.
	Every time.Duration
	// Now is this host's clock, for the spend-rate window and its clock
	// hour; default time.Now.
	Now func() time.Time
	// Clock pins the time the response cache's expiry is read at (tests);
	// nil: the database clock.
	Clock keys.Clock
	// Passes run after the alerts, before the cache sweep, on each check.
	Passes []Pass
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns cfg with its zero optional fields filled.
func (cfg Config) WithDefaults() Config {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}

// Validate refuses a config a Watch cannot work with, naming the field.
func (cfg Config) Validate() error {
	const pkg = "spendwatch"
	return cmp.Or(service.Positive(pkg, "Every", cfg.Every),
		service.NilAt(pkg, "Passes", slices.IndexFunc(cfg.Passes, func(p Pass) bool { return p == nil })),
		service.Required(pkg, service.Field{Name: "Pool", Missing: cfg.Pool == nil},
			service.Field{Name: "Config", Missing: cfg.Config == nil}, service.Field{Name: "Alerter", Missing: cfg.Alerter == nil}))
}

// Watch runs the spend checks: RunOnce is one, Start runs one every Every
// until Stop.
type Watch struct {
	cfg  Config
	loop service.Loop
	// TestSignals: see its type.
	TestSignals TestSignals
}

// New returns a Watch, or Validate's error.
func New(cfg Config) (*Watch, error) {
	return service.New(cfg, func(cfg Config) *Watch { return &Watch{cfg: cfg} })
}

// Start runs a check now and then every Every (jittered) until Stop.
func (w *Watch) Start(ctx context.Context) {
	tick := 0
	w.loop.Start(ctx, w.cfg.Every, 0.8, 1.2, func(ctx context.Context) {
		w.RunOnce(ctx, tick)
		service.Signal(w.TestSignals.Checks, tick)
		tick++
	})
}

// Stop ends the checks and waits for the one under way.
func (w *Watch) Stop() { w.loop.Stop() }

// TestSignals are sent to by a running Watch when set (tests): the tick
// of each finished check, without blocking.
type TestSignals struct {
	Checks chan int
}

// RunOnce is the tick-th check (counted from 0): fold, alerts, the
// passes, the cache sweep, the settled batches' announcements. Errors are
// logged; the next check tries again.
func (w *Watch) RunOnce(ctx context.Context, tick int) {
	if _, err := ledger.FoldSpend(ctx, w.cfg.Pool); err != nil && ctx.Err() == nil {
		w.cfg.Logger.WarnContext(ctx, "fold spend counters", "err", err)
	}
	w.checkSpend(ctx)
	for _, p := range w.cfg.Passes {
		p(ctx, tick)
	}
	w.sweepCache(ctx)
	if _, err := settled.Announce(ctx, w.cfg.Pool, w.cfg.Alerter); err != nil && ctx.Err() == nil {
		w.cfg.Logger.WarnContext(ctx, "announce settled batches", "err", err)
	}
}

// Prepaid thresholds, each alerted once per key, fleet-wide.
var prepaidThresholds = []struct {
	share float64
	kind  keys.AlertKind
}{
	{0.70, keys.AlertPrepaid70},
	{0.90, keys.AlertKind("prepaid_90")},
}

// checkSpend raises the prepaid and spend-rate alerts of the keys.
func (w *Watch) checkSpend(ctx context.Context) {
	now := w.cfg.Now()
	for _, k := range w.cfg.Keys {
		name := k.Name
		if k.PrepaidUSD > 0 {
			spent, err := ledger.SpendByKey(ctx, w.cfg.Pool, name, time.Time{})
			if err != nil {
				w.cfg.Logger.WarnContext(ctx, "prepaid check", "key", name, "err", err)
				continue
			}
			for _, th := range prepaidThresholds {
				if spent < th.share*k.PrepaidUSD {
					continue
				}
				w.cfg.Alerter.AlertOnce(ctx, w.cfg.Pool, prepaidClaim(th.kind, k.PrepaidUSD), keys.Alert{Kind: th.kind, Key: name,
					Message: fmt.Sprintf("%.0f %% of the prepaid balance spent", 100*spent/k.PrepaidUSD),
					Fields:  map[string]any{"spent_usd": spent, "prepaid_usd": k.PrepaidUSD}})
			}
		}
		if limit := w.cfg.Config.Alerts.MaxUSDPerHour; limit > 0 {
			spent, err := ledger.SpendByKey(ctx, w.cfg.Pool, name, now.Add(-time.Hour))
			if err != nil {
				w.cfg.Logger.WarnContext(ctx, "spend-rate check", "key", name, "err", err)
				continue
			}
			if spent > limit {
				// Once per clock hour: a sustained overspend alerts again
				// the next hour, not on every check.
				bucket := "spend_rate:" + now.UTC().Format("2006-01-02T15")
				w.cfg.Alerter.AlertOnce(ctx, w.cfg.Pool, bucket, keys.Alert{Kind: keys.AlertSpendRate, Key: name,
					Message: fmt.Sprintf("spent $%.2f in the last hour, over alerts.max_usd_per_hour $%.2f", spent, limit),
					Fields:  map[string]any{"spent_usd_last_hour": spent, "max_usd_per_hour": limit}})
			}
		}
	}
}

// prepaidClaim is the alert-once kind of a prepaid threshold for one
// prepaid amount. A top-up is a new prepaid_usd (the total bought for the
// key, which the key's whole spend is compared with): it makes new claims,
// so each threshold alerts again when spend next crosses it. Processes still
// running with the old amount keep finding their old claims and stay
// quiet, instead of alerting again on every check.
func prepaidClaim(kind keys.AlertKind, prepaidUSD float64) string {
	return string(kind) + "@" + strconv.FormatFloat(prepaidUSD, 'f', -1, 64)
}

// cacheSweepLimit bounds the expired response-cache rows one check
// deletes.
const cacheSweepLimit = 5000

// sweepCache deletes expired response-cache rows (one process at a time).
func (w *Watch) sweepCache(ctx context.Context) {
	var now time.Time // zero: the database clock
	if w.cfg.Clock != nil {
		now = w.cfg.Clock.Now()
	}
	n, err := ledger.SweepResponseCache(ctx, w.cfg.Pool, now, cacheSweepLimit)
	if err != nil && ctx.Err() == nil {
		w.cfg.Logger.WarnContext(ctx, "sweep response cache", "err", err)
		return
	}
	if n > 0 {
		w.cfg.Logger.DebugContext(ctx, "response cache swept", "deleted", n)
	}
}
