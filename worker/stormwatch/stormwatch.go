// Package stormwatch is the worker's storm loop: every check it raises
// storm_open, once per storm for the fleet, for each of this process's keys
// whose storm breaker has been open longer than the key's
// storm_alert_after (AlertAfter), then runs the passes the worker gives it
// (the safety net's requeue of a held key's dead letters). Every process
// runs it; keys.Alerter.AlertOnce, claimed under the storm's opening, makes
// the alert fire once however many processes see the storm.
package stormwatch

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/service"
)

// AlertAfterDefault is a key's storm_alert_after default: a storm breaker
// open this long raises one storm_open alert. Shorter storms heal by
// themselves and page nobody.
const AlertAfterDefault = 5 * time.Minute

// AlertAfter is how long k's storm breaker may stay open before storm_open
// fires: its storm_alert_after, or AlertAfterDefault. The worker, `triage
// keys` and the web window all read it here.
func AlertAfter(k *config.Key) time.Duration {
	if k.StormAlertAfter <= 0 {
		return AlertAfterDefault
	}
	return k.StormAlertAfter
}

// StatusReader reads a key's shared breaker state (keys.Store).
type StatusReader interface {
	KeyStatus(ctx context.Context, key string) (*keys.KeyStatus, error)
}

// Pass is a pass the watch runs on each check after the storm alerts, in
// the order given.
type Pass func(ctx context.Context)

// Config is what a Watch works with. Pool, Status, Alerter and Every are
// required (Validate); Logger has a default (WithDefaults).
type Config struct {
	// Pool is where the alert's once-for-the-fleet claim is written.
	Pool *pgxpool.Pool
	// Keys are this process's keys: their storm breakers are looked at.
	Keys []*config.Key
	// Status reads a key's breakers.
	Status StatusReader
	// Alerter raises the alerts.
	Alerter *keys.Alerter
	// Every is how often a check runs (the worker's SpendCheck), jittered.
	Every time.Duration
	// Passes run after the storm alerts, on each check.
	Passes []Pass
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns cfg with its zero optional fields filled.
func (cfg Config) WithDefaults() Config {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return cfg
}

// Validate refuses a config a Watch cannot work with, naming the field.
func (cfg Config) Validate() error {
	const pkg = "stormwatch"
	return cmp.Or(service.Positive(pkg, "Every", cfg.Every),
		service.NilAt(pkg, "Passes", slices.IndexFunc(cfg.Passes, func(p Pass) bool { return p == nil })),
		service.NilAt(pkg, "Keys", slices.Index(cfg.Keys, nil)),
		service.Required(pkg, service.Field{Name: "Pool", Missing: cfg.Pool == nil},
			service.Field{Name: "Status", Missing: cfg.Status == nil}, service.Field{Name: "Alerter", Missing: cfg.Alerter == nil}))
}

// Watch runs the storm checks: RunOnce is one, Start runs one every Every
// until Stop.
type Watch struct {
	cfg  Config
	loop service.Loop
	// TestSignals: see its type.
	TestSignals TestSignals
}

// TestSignals are sent to by a running Watch when set (tests): each
// finished check's Result, without blocking.
type TestSignals struct {
	Checks chan Result
}

// Result is what one check found.
type Result struct {
	// Alerted names the keys whose storm has been open longer than their
	// storm_alert_after (the alert is raised once per storm: a key stays
	// here on later checks while the fleet's claim keeps it quiet).
	Alerted []string
}

// New returns a Watch, or Validate's error.
func New(cfg Config) (*Watch, error) {
	return service.New(cfg, func(cfg Config) *Watch { return &Watch{cfg: cfg} })
}

// Start runs a check now and then every Every (jittered) until Stop.
func (w *Watch) Start(ctx context.Context) {
	w.loop.Start(ctx, w.cfg.Every, 0.8, 1.2, func(ctx context.Context) {
		service.Signal(w.TestSignals.Checks, w.RunOnce(ctx))
	})
}

// Stop ends the checks and waits for the one under way.
func (w *Watch) Stop() { w.loop.Stop() }

// RunOnce is one check: the storm alerts, then the passes. Errors are
// logged; the next check tries again.
func (w *Watch) RunOnce(ctx context.Context) Result {
	res := w.checkStorms(ctx)
	for _, p := range w.cfg.Passes {
		p(ctx)
	}
	return res
}

// checkStorms raises storm_open for the keys whose storm breaker has been
// open longer than their storm_alert_after.
func (w *Watch) checkStorms(ctx context.Context) Result {
	var res Result
	for _, k := range w.cfg.Keys {
		st, err := w.cfg.Status.KeyStatus(ctx, k.Name)
		if err != nil {
			w.cfg.Logger.WarnContext(ctx, "storm check", "key", k.Name, "err", err)
			continue
		}
		s := st.Storm
		if s.State == keys.StateClosed || s.OpenedAt == nil {
			continue
		}
		open := st.Now.Sub(*s.OpenedAt)
		if open < AlertAfter(k) {
			continue
		}
		res.Alerted = append(res.Alerted, k.Name)
		// One alert per storm: the storm is named by when it opened.
		w.cfg.Alerter.AlertOnce(ctx, w.cfg.Pool, string(keys.AlertStormOpen)+":"+s.OpenedAt.UTC().Format(time.RFC3339Nano), keys.Alert{
			Kind: keys.AlertStormOpen, Key: k.Name,
			Message: "provider storm: the key's storm breaker is still open; its jobs stay queued and probes continue",
			Fields:  map[string]any{"open_for": open.Round(time.Second).String(), "cooldown_s": s.CooldownS, "reason": s.Reason},
		})
	}
	return res
}
