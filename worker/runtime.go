package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/batchapi"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/fallbackmove"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/jobrun"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/leftresponses"
	"github.com/triage-dev/triage/worker/provider"
	"github.com/triage-dev/triage/worker/retention"
	"github.com/triage-dev/triage/worker/settled"
	"github.com/triage-dev/triage/worker/spendwatch"
	"github.com/triage-dev/triage/worker/stormwatch"
	"github.com/triage-dev/triage/worker/submitter"
	"github.com/triage-dev/triage/worker/sweep"
)

// Defaults for Options.
const (
	// BackoffBaseDefault and BackoffCapDefault bound transient retries:
	// base·2^(attempt-1), capped, with jitter (base 1 s, cap 5 min: docs/design.md, "Classes and reactions").
	BackoffBaseDefault = time.Second
	BackoffCapDefault  = 5 * time.Minute
	// ThrottleWaitDefault is the pause after a throttle that names no wait; it
	// doubles with each further hint-less throttle on the key within a minute,
	// up to jobrun.ThrottleWaitMax (the adaptive default of docs/design.md).
	ThrottleWaitDefault = 2 * time.Second
	// BudgetRecheckDefault is how long a job of a batch paused at its spend
	// cap waits before looking again (raising the budget wakes jobs sooner).
	BudgetRecheckDefault = 30 * time.Second
	// RetryDeferDefault is how long a retry over the budget waits to try
	// again (jittered); the wait is a snooze, not an attempt.
	RetryDeferDefault = 2 * time.Second
	// SpendCheckDefault is how often prepaid and spend-rate alerts are
	// evaluated from the ledger.
	SpendCheckDefault = 2 * time.Second
	// MaxAgeDefault: see Options.MaxAge.
	MaxAgeDefault = 7 * 24 * time.Hour
	// JobMarginDefault: see Options.JobMargin.
	JobMarginDefault = 30 * time.Second
	// StopMarginDefault is added to the job timeout for StopGrace: time for
	// River to record the last jobs' outcomes after their runs return.
	StopMarginDefault = 5 * time.Second
	// BatchWaitDefault is how long a job sleeps while its line waits for a
	// provider batch: the submitter wakes it as soon as its answer is in,
	// and sweeps for any wake it missed, so this only bounds the idle runs of
	// a job whose batch takes the whole 24 h.
	BatchWaitDefault = time.Hour
	// HoldAnswerDefault bounds how long a paid-for answer is held in memory
	// while its completion waits for an unreachable database (Options.HoldAnswer).
	HoldAnswerDefault = 2 * time.Minute
)

// Options configure a Runtime.
type Options struct {
	// Config is the parsed triage.toml. Required.
	Config *config.Config
	// Pool reaches triage's and River's tables. Required.
	Pool *pgxpool.Pool
	// Schema is River's schema (River's Config.Schema). Default "": the
	// connection's search_path.
	Schema string
	// Getenv reads the API keys' environment variables. Default: none set.
	Getenv func(string) string
	// Keys limits the keys this process works. Default: every key.
	Keys []string
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Clock pins the time of the shared key state (tests). Default nil: the
	// database clock.
	Clock keys.Clock
	// HostClock stands in for this host's own clock (tests of a host whose
	// clock is off): what the process times by itself (its jobs' deadlines)
	// reads it, while the shared key state still reads Clock, or the
	// database's clock, as a real host whose clock is off would; the batch
	// submitter corrects it by its offset from the database's clock before
	// writing a lease or a poll time. Default: Clock, else the system clock.
	HostClock keys.Clock
	// HTTPClient replaces each key's HTTP client (tests). Default: one pooled
	// client per key.
	HTTPClient *http.Client
	// BackoffBase and BackoffCap: see BackoffBaseDefault.
	BackoffBase, BackoffCap time.Duration
	// ThrottleWait is the first adaptive throttle pause. Default
	// ThrottleWaitDefault.
	ThrottleWait time.Duration
	// FetchCooldown, when set, is every queue's River fetch cooldown (tests,
	// benchmarks). Default 0: each key queue's comes from the key's
	// fetch_cooldown (config.Key.FetchCooldown), other queues take River's.
	// FetchPollInterval is River's. Default River's (1 s).
	FetchCooldown, FetchPollInterval time.Duration
	// SupervisorTick: see keys.SupervisorConfig. Default keys' default.
	SupervisorTick time.Duration
	// ProbeLease: see keys.StoreConfig. Default keys' default, raised to
	// twice the longest call of the keys this process works plus JobMargin
	// (probeLeaseDefault, resolved in WithDefaults).
	ProbeLease time.Duration
	// Alerter raises alerts. Default: one built from Config.Alerts.
	Alerter *keys.Alerter
	// ID names this process to River. Default River's.
	ID string
	// JobMargin is added to the longest key timeout for River's job timeout:
	// the call is bounded by the key's timeout, the ledger writes around it
	// need a moment more. Default JobMarginDefault.
	JobMargin time.Duration
	// RescueAfter is how long a job may stay running before River hands it to
	// another worker (its worker died). Default 2·job timeout + 1 min: minutes,
	// not River's default hour (rescueAfterDefault, resolved in
	// WithDefaults); never shorter than the job timeout (Horizon).
	RescueAfter time.Duration
	// BudgetRecheck: see BudgetRecheckDefault.
	BudgetRecheck time.Duration
	// RetryWindow and RetryFloor shape the fleet retry budget
	// (decide.RetryBudget; RetryBudget returns it). Default
	// decide.RetryWindowDefault, decide.RetryFloorDefault.
	RetryWindow time.Duration
	RetryFloor  int
	// RetryDefer: see RetryDeferDefault.
	RetryDefer time.Duration
	// MaxAge is how long a job may wait in total (parked by an open breaker, a
	// spend cap, ...) before it is dead-lettered as snoozed_out. Default
	// MaxAgeDefault.
	MaxAge time.Duration
	// SpendCheck: see SpendCheckDefault.
	SpendCheck time.Duration
	// Observer hears about every call (metrics). Default: none.
	Observer Observer
	// HoldAnswer is how long an answer that arrived is held in memory while
	// the database is unreachable, its completion retried with backoff.
	// Default HoldAnswerDefault.
	HoldAnswer time.Duration
	// Pacing configures each key's pacer. Zero fields take keys' defaults;
	// Concurrency is the key's.
	Pacing keys.PacerConfig
	// PacerHeartbeat is how often the pacers renew their heartbeat rows and
	// merge what the fleet learned. Default keys.PacerHeartbeatDefault.
	PacerHeartbeat time.Duration
	// KeyPauseAfter: a throttle whose retry-after is longer pauses the key
	// fleet-wide; shorter ones snooze only the job. Default
	// keys.KeyPauseAfterDefault.
	KeyPauseAfter time.Duration
	// BatchWait: see BatchWaitDefault.
	BatchWait time.Duration
	// Batch times the keys' batch submitters (pipelines with mode batch or
	// auto). Zero fields take worker/submitter's defaults.
	Batch submitter.Tuning
	// RequeueDeadLetters requeues dead letters by id through the
	// operator's requeue (worker/operator.Requeue: once per dead letter,
	// in one transaction), returning how many went back. The safety net
	// calls it for the dead letters of a rejection streak that held their
	// key (see worker/jobrun/watch.go). Default nil: they stay dead-lettered and a
	// warning says so; `triage work` and `triage run` set it.
	RequeueDeadLetters func(ctx context.Context, ids []int64) (int, error)
}

// Observer hears about every provider call this process makes
// (jobrun.Observer); CallEvent is one finished call; HoldObserver,
// implemented by an Observer, hears each hold the safety net sets.
type (
	Observer     = jobrun.Observer
	CallEvent    = jobrun.CallEvent
	HoldObserver = jobrun.HoldObserver
)

// Runtime is one triage worker process: a River client working the keys'
// queues, the Supervisor that keeps those queues in line with the shared key
// state, and the per-key clients and limiters.
type Runtime struct {
	opts       Options
	cfg        *config.Config
	pool       *pgxpool.Pool
	log        *slog.Logger
	river      *river.Client[pgx.Tx]
	store      *keys.Store
	supervisor *keys.Supervisor
	alerter    *keys.Alerter
	ownAlerter bool
	keys       map[string]*jobrun.Key
	// run is one job's run (worker/jobrun): River's worker for the
	// records' jobs.
	run        *jobrun.Runner
	pacers     *keys.Pacers
	horizon    Horizon
	submitters []*submitter.Submitter
	// retention prunes finished work ([retention]); nil when off.
	retention *retention.Service
	// sweeper dead-letters the records whose job ended without an outcome.
	sweeper *sweep.Sweeper
	// mover moves the queued jobs of open keys to their fallbacks.
	mover *fallbackmove.Mover
	// spend is the spend loop: alerts, the sweep, the left background
	// responses, the cache, the settled batches.
	spend *spendwatch.Watch
	// storms raises the storm alerts and runs the safety net's requeue of
	// a held key's dead letters (worker/jobrun/watch.go).
	storms *stormwatch.Watch
}

// WithDefaults returns o with every unset (zero) setting replaced by its
// documented default: the one place the worker's option defaults are
// resolved. A negative setting is left as it is, for validate to refuse.
// The two whose default depends on the keys, ProbeLease
// (probeLeaseDefault: the keys this process works) and RescueAfter
// (rescueAfterDefault: every key in Config), are resolved here too when
// Config is set and JobMargin is not negative; settings that keep another
// package's default (SupervisorTick, PacerHeartbeat, KeyPauseAfter, Pacing,
// Batch, FetchCooldown, FetchPollInterval) stay zero here.
func (o Options) WithDefaults() Options {
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.BackoffBase = cmp.Or(o.BackoffBase, BackoffBaseDefault)
	o.BackoffCap = cmp.Or(o.BackoffCap, BackoffCapDefault)
	o.JobMargin = cmp.Or(o.JobMargin, JobMarginDefault)
	o.BudgetRecheck = cmp.Or(o.BudgetRecheck, BudgetRecheckDefault)
	rb := decide.RetryBudget{Window: o.RetryWindow, Floor: o.RetryFloor}.WithDefaults()
	o.RetryWindow, o.RetryFloor = rb.Window, rb.Floor
	o.RetryDefer = cmp.Or(o.RetryDefer, RetryDeferDefault)
	o.MaxAge = cmp.Or(o.MaxAge, MaxAgeDefault)
	o.SpendCheck = cmp.Or(o.SpendCheck, SpendCheckDefault)
	o.ThrottleWait = cmp.Or(o.ThrottleWait, ThrottleWaitDefault)
	o.HoldAnswer = cmp.Or(o.HoldAnswer, HoldAnswerDefault)
	o.BatchWait = cmp.Or(o.BatchWait, BatchWaitDefault)
	if o.Config != nil && o.JobMargin >= 0 {
		if o.ProbeLease == 0 {
			o.ProbeLease = probeLeaseDefault(o.Config, o.keyNames(), o.JobMargin)
		}
		if o.RescueAfter == 0 {
			o.RescueAfter = rescueAfterDefault(o.Config, o.JobMargin)
		}
	}
	return o
}

// keyNames are the keys this process works: Keys, else every key in
// Config.
func (o Options) keyNames() []string {
	if len(o.Keys) > 0 || o.Config == nil {
		return o.Keys
	}
	names := make([]string, 0, len(o.Config.Keys))
	for _, k := range o.Config.Keys {
		names = append(names, k.Name)
	}
	return names
}

// validate refuses settings no default can stand for: a negative wait,
// window, margin or count is a mistake, said with the setting's name,
// rather than quietly run as the default.
func (o Options) validate() error {
	if o.Config == nil || o.Pool == nil {
		return errors.New("worker: Options.Config and Options.Pool are required")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"BackoffBase", o.BackoffBase}, {"BackoffCap", o.BackoffCap}, {"ThrottleWait", o.ThrottleWait},
		{"FetchCooldown", o.FetchCooldown}, {"FetchPollInterval", o.FetchPollInterval}, {"SupervisorTick", o.SupervisorTick},
		{"ProbeLease", o.ProbeLease}, {"JobMargin", o.JobMargin}, {"RescueAfter", o.RescueAfter},
		{"BudgetRecheck", o.BudgetRecheck}, {"RetryWindow", o.RetryWindow}, {"RetryDefer", o.RetryDefer},
		{"MaxAge", o.MaxAge}, {"SpendCheck", o.SpendCheck}, {"HoldAnswer", o.HoldAnswer},
		{"PacerHeartbeat", o.PacerHeartbeat}, {"KeyPauseAfter", o.KeyPauseAfter}, {"BatchWait", o.BatchWait},
	} {
		if d.v < 0 {
			return fmt.Errorf("worker: Options.%s must not be negative, got %s (0 takes the default)", d.name, d.v)
		}
	}
	if o.RetryFloor < 0 {
		return fmt.Errorf("worker: Options.RetryFloor must not be negative, got %d (0 takes the default)", o.RetryFloor)
	}
	if err := o.Batch.Validate(); err != nil {
		return fmt.Errorf("worker: Options.Batch: %w", err)
	}
	if err := o.Pacing.Validate(); err != nil {
		return fmt.Errorf("worker: Options.Pacing: %w", err)
	}
	return nil
}

// RetryBudget is the fleet retry budget a worker with these options
// checks before a retry: `triage keys`, the web window and /metrics show
// the budget with the same value.
func (o Options) RetryBudget() decide.RetryBudget {
	o = o.WithDefaults()
	return decide.RetryBudget{Window: o.RetryWindow, Floor: o.RetryFloor}
}

// New builds a Runtime; Start runs it.
func New(opts Options) (*Runtime, error) {
	opts = opts.WithDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	cfg := opts.Config
	names := opts.keyNames()
	r := &Runtime{opts: opts, cfg: cfg, pool: opts.Pool, log: opts.Logger, keys: map[string]*jobrun.Key{}}
	sw, err := sweep.New(sweep.Config{Pool: opts.Pool, Schema: opts.Schema, Config: cfg, MaxAge: opts.MaxAge, Every: opts.SpendCheck, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	r.sweeper = sw

	queues := map[string]river.QueueConfig{}
	// Each key's run state, its gate added once the store is built.
	keyCfgs := map[string]jobrun.KeyConfig{}
	for _, name := range names {
		k, err := cfg.Key(name)
		if err != nil {
			return nil, fmt.Errorf("worker: --keys: %w", err)
		}
		apiKey, err := k.APIKey(opts.Getenv)
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		client, err := provider.New(provider.Options{
			Vendor: k.Vendor, Format: wireFormat(k), Path: k.Path, BaseURL: k.BaseURL, APIKey: apiKey,
			Timeout: k.Timeout, Concurrency: k.Concurrency, HTTPClient: opts.HTTPClient,
		})
		if err != nil {
			return nil, fmt.Errorf("worker: key %q: %w", k.Name, err)
		}
		pacer, err := newPacer(opts.Pacing, k)
		if err != nil {
			return nil, fmt.Errorf("worker: key %q: %w", k.Name, err)
		}
		keyCfgs[k.Name] = jobrun.KeyConfig{Config: k, Client: client, CallMax: cfg.CallMax(k), APIKey: apiKey,
			Pacer: pacer, Watch: WatchSettings(k), ThrottleWait: opts.ThrottleWait}
		queues[keys.QueueName(k.Name)] = river.QueueConfig{MaxWorkers: k.Concurrency, FetchCooldown: queueFetchCooldown(*k, opts)}
		// The probe queue runs the key's probe and, while the key's queue
		// is paused, the jobs applying a paid answer (keys.Supervisor).
		queues[keys.ProbeQueueName(k.Name)] = river.QueueConfig{MaxWorkers: k.Concurrency}
	}

	r.store, err = keys.NewStore(opts.Pool, keys.StoreConfig{Clock: opts.Clock, ProbeLease: opts.ProbeLease, RiverSchema: opts.Schema,
		// The worker dead-letters a job beyond its pipeline's max_attempts
		// (AttemptHeadroom River attempts before River's own limit) or older
		// than MaxAge before it can call.
		ProbeAttemptsLeft: jobargs.AttemptHeadroom + 1, ProbeMaxAge: opts.MaxAge})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	for name, kc := range keyCfgs {
		kc.Gate, err = r.store.NewGate(keys.GateConfig{Key: name, ProbeInterval: kc.Config.ProbeInterval, Storm: StormSettings(kc.Config)})
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		r.keys[name] = jobrun.NewKey(kc)
	}
	r.alerter = opts.Alerter
	if r.alerter == nil {
		r.alerter, err = keys.NewAlerter(keys.AlerterConfig{Logger: opts.Logger, WebhookURL: cfg.Alerts.WebhookURL, Pool: opts.Pool, Clock: opts.Clock})
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		r.ownAlerter = true
	}

	r.run, err = jobrun.New(jobrun.Config{Config: cfg, Pool: opts.Pool, Schema: opts.Schema, Logger: opts.Logger,
		Store: r.store, Alerter: r.alerter, Keys: r.keys,
		Reconcile: func(ctx context.Context, key string) error { return r.supervisor.Reconcile(ctx, key) },
		Clock:     opts.Clock, HostClock: opts.HostClock,
		BackoffBase: opts.BackoffBase, BackoffCap: opts.BackoffCap, BatchWait: opts.BatchWait, BudgetRecheck: opts.BudgetRecheck,
		HoldAnswer: opts.HoldAnswer, JobMargin: opts.JobMargin, KeyPauseAfter: opts.KeyPauseAfter, MaxAge: opts.MaxAge,
		RetryDefer: opts.RetryDefer, RetryBudget: opts.RetryBudget(), Observer: opts.Observer,
		RequeueDeadLetters: opts.RequeueDeadLetters})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, r.run.Worker()); err != nil {
		return nil, fmt.Errorf("worker: register: %w", err)
	}
	r.horizon = fleetHorizon(cfg, opts.JobMargin, opts.RescueAfter)
	rc, err := river.NewClient(riverpgxv5.New(opts.Pool), &river.Config{
		ID:                   opts.ID,
		Schema:               opts.Schema,
		Logger:               opts.Logger,
		Queues:               queues,
		Workers:              workers,
		JobTimeout:           r.horizon.JobTimeout,
		RescueStuckJobsAfter: r.horizon.RescueAfter,
		FetchCooldown:        opts.FetchCooldown,
		FetchPollInterval:    opts.FetchPollInterval,
		MaxAttempts:          config.MaxAttemptsDefault,
	})
	if err != nil {
		return nil, fmt.Errorf("worker: river client: %w", err)
	}
	r.river = rc
	r.supervisor, err = keys.NewSupervisor(r.store, rc, keys.SupervisorConfig{Keys: names, Tick: opts.SupervisorTick, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	pacers := map[string]*keys.Pacer{}
	for name, k := range r.keys {
		pacers[name] = k.Pacer()
	}
	r.pacers, err = keys.NewPacers(r.store, pacers, keys.PacersConfig{Heartbeat: opts.PacerHeartbeat, Logger: opts.Logger,
		Record: r.recordPace})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if err := r.newSubmitters(); err != nil {
		return nil, err
	}
	if err := r.newWatches(names); err != nil {
		return nil, err
	}
	// Ages are counted on the real clock: a process whose time is pinned
	// (Options.Clock, tests) writes moments the pruner would misread, so it
	// does not prune.
	if ret := opts.Config.Retention; !ret.Off && opts.Clock == nil {
		r.retention = retention.New(retention.Config{Pool: opts.Pool, Age: ret.Age, DeadLetterAge: ret.DeadLetterAge,
			Interval: ret.Interval, Logger: opts.Logger})
	}
	return r, nil
}

// recordPace writes a key's pace to its history (the night's picture of
// a past batch draws it), at the runtime's clock, as its calls are.
func (r *Runtime) recordPace(ctx context.Context, key string, st keys.PaceState) error {
	p := ledger.PacePoint{Key: key, At: r.run.Now(), Source: string(st.Source), RatePerS: st.FleetRate}
	if st.ReqLimit > 0 {
		l := st.ReqLimit
		p.LimitPerS = &l
	}
	return ledger.RecordPace(ctx, r.pool, p)
}

// newSubmitters builds a batch submitter for each key this process works
// that serves a model of a batch or auto pipeline (its own or a fallback),
// and a collect-only one for every other key: a key whose pipelines were
// switched to sync mode (or a rolling deploy that mixes modes) can still
// have provider batches in flight, and their answers must be collected
// and applied (the open-line rule, ledger.LineHold).
func (r *Runtime) newSubmitters() error {
	batchKeys := map[string]bool{}
	for _, p := range r.cfg.Pipelines {
		if !p.UsesBatch() {
			continue
		}
		for _, name := range append([]string{p.Model}, p.Fallback...) {
			if m, err := r.cfg.Model(name); err == nil {
				batchKeys[m.Key] = true
			}
		}
	}
	for name, k := range r.keys {
		collectOnly := !batchKeys[name]
		kc := k.Config()
		client, err := batchapi.New(batchapi.Options{Vendor: kc.Vendor, Format: wireFormat(kc), Path: kc.Path, BaseURL: kc.BaseURL,
			APIKey: k.APIKey(), Timeout: kc.Timeout, HTTPClient: r.opts.HTTPClient})
		if collectOnly && err != nil {
			// No Batch API client for it (a vendor without one): it never
			// had a provider batch to collect.
			r.log.Debug("no batch collector for key", "key", name, "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("worker: key %q: batch client: %w", name, err)
		}
		s, err := submitter.New(submitter.Config{Key: kc, Config: r.cfg, Client: client, Pool: r.pool, Store: r.store, Gate: k.Gate(),
			RiverSchema: r.opts.Schema, Clock: r.opts.Clock, HostClock: r.opts.HostClock, Logger: r.log, Alerter: r.alerter, Tuning: r.opts.Batch.ForKey(kc),
			CollectOnly: collectOnly})
		if err != nil {
			return fmt.Errorf("worker: key %q: %w", name, err)
		}
		r.submitters = append(r.submitters, s)
	}
	return nil
}

// newWatches builds the fallback mover, the spend loop, with its passes
// (the orphan sweep and the left background responses of this process's
// keys), and the storm loop, with its pass (the safety net's requeue).
func (r *Runtime) newWatches(names []string) error {
	mover, err := fallbackmove.New(fallbackmove.Config{Pool: r.pool, Schema: r.opts.Schema, Config: r.cfg, Status: r.store,
		Keys: slices.Sorted(maps.Keys(r.keys)), Plan: r.run.FallbackPlan, Tick: r.opts.SupervisorTick, Logger: r.log})
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	r.mover = mover
	clients := map[string]leftresponses.Client{}
	var spendKeys []*config.Key
	for _, name := range names {
		k := r.keys[name]
		if slices.Contains(spendKeys, k.Config()) {
			continue // named twice in Options.Keys
		}
		spendKeys = append(spendKeys, k.Config())
		if k.Config().Responses() {
			clients[name] = k.Client()
		}
	}
	left, err := leftresponses.New(leftresponses.Config{Pool: r.pool, Config: r.cfg, Clients: clients, Logger: r.log})
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	r.spend, err = spendwatch.New(spendwatch.Config{Pool: r.pool, Config: r.cfg, Keys: spendKeys, Alerter: r.alerter,
		Every: r.opts.SpendCheck, Now: r.run.Now, Clock: r.opts.Clock, Logger: r.log,
		Passes: []spendwatch.Pass{r.sweeper.Tick, func(ctx context.Context, _ int) { left.RunOnce(ctx) }}})
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	var stormKeys []*config.Key
	for _, name := range slices.Sorted(maps.Keys(r.keys)) {
		stormKeys = append(stormKeys, r.keys[name].Config())
	}
	r.storms, err = stormwatch.New(stormwatch.Config{Pool: r.pool, Keys: stormKeys, Status: r.store, Alerter: r.alerter,
		Every: r.opts.SpendCheck, Logger: r.log, Passes: []stormwatch.Pass{r.run.RequeueSuspects}})
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}

// StormSettings are a key's storm breaker thresholds from its
// configuration, defaults filled in.
func StormSettings(k *config.Key) keys.StormSettings {
	return keys.StormSettings{
		Failures: k.StormFailures, Share: k.StormShare, MinCalls: k.StormMinCalls, Window: k.StormWindow,
		ProbeMin: k.StormProbeMin, ProbeMax: k.StormProbeMax,
	}.WithDefaults()
}

// WatchSettings are a key's safety-net thresholds from its configuration,
// defaults filled in.
func WatchSettings(k *config.Key) keys.WatchSettings {
	return keys.WatchSettings{Rejections: k.SuspectRejections, ThrottleAfter: k.ThrottleHoldAfter}.WithDefaults()
}

// Pacing returns what this process's pacer knows about key.
func (r *Runtime) Pacing(key string) (keys.PaceState, bool) {
	k := r.keys[key]
	if k == nil {
		return keys.PaceState{}, false
	}
	return k.Pacer().State(), true
}

// newPacer is the pacer of key k: its concurrency, and its rpm/tpm
// settings as the limits it starts at (keys.PaceConfigured) when set.
func newPacer(cfg keys.PacerConfig, k *config.Key) (*keys.Pacer, error) {
	cfg.Concurrency = k.Concurrency
	if k.RPM > 0 {
		cfg.KnownRate = float64(k.RPM) / 60
	}
	if k.TPM > 0 {
		cfg.KnownTokens = float64(k.TPM) / 60
	}
	return keys.NewPacer(cfg)
}

// River is the runtime's River client (for inserting and subscribing).
func (r *Runtime) River() *river.Client[pgx.Tx] { return r.river }

// Store is the shared key state.
func (r *Runtime) Store() *keys.Store { return r.store }

// Limiter returns a key's concurrency limiter, or nil.
func (r *Runtime) Limiter(key string) *keys.Limiter {
	if k := r.keys[key]; k != nil {
		return k.Limiter()
	}
	return nil
}

// queueFetchCooldown is the River fetch cooldown of k's queue: the key's
// fetch_cooldown, unless Options.FetchCooldown sets one for every queue
// (0: the client's applies), and never longer than the poll interval
// (River refuses that).
func queueFetchCooldown(k config.Key, opts Options) time.Duration {
	if opts.FetchCooldown > 0 {
		return 0
	}
	d := k.FetchCooldown
	if opts.FetchPollInterval > 0 {
		d = min(d, opts.FetchPollInterval)
	}
	return d
}

// Start reconciles the key queues once (so a queue left paused by a dead
// process is resumed before fetching starts), then starts the Supervisor and
// River.
func (r *Runtime) Start(ctx context.Context) error {
	if err := r.supervisor.ReconcileAll(ctx); err != nil {
		r.log.WarnContext(ctx, "reconcile key queues", "err", err)
	}
	// The fleet counts this process before it makes a call, so a second
	// process never doubles the load.
	if err := r.pacers.Start(ctx); err != nil {
		return fmt.Errorf("worker: pacers: %w", err)
	}
	if err := r.supervisor.Start(ctx); err != nil {
		r.pacers.Stop(ctx)
		return fmt.Errorf("worker: supervisor: %w", err)
	}
	if err := r.river.Start(ctx); err != nil {
		r.supervisor.Stop()
		r.pacers.Stop(ctx)
		return fmt.Errorf("worker: start river: %w", err)
	}
	for _, s := range r.submitters {
		s.Start(ctx)
	}
	if r.retention != nil {
		r.retention.Start(ctx)
	}
	r.mover.Start(ctx)
	r.spend.Start(ctx)
	r.storms.Start(ctx)
	return nil
}

// StopGrace is how long to give Stop so that every call in flight can
// finish: the longest timeout of the keys this process works plus
// Options.JobMargin (the ledger writes around the call) plus
// StopMarginDefault. A call cut by a shorter grace has been paid for, and
// since no provider replays a repeated Idempotency-Key its resend is billed
// again.
func (r *Runtime) StopGrace() time.Duration { return r.horizon.JobTimeout + StopMarginDefault }

// Stop lets running calls finish (River's soft stop) until ctx ends, then
// cancels them; it stops the Supervisor, announces the batches that settled
// (settled.Announce) and flushes alerts. Give it
// StopGrace. An answer that arrived before a cancel is still stored.
func (r *Runtime) Stop(ctx context.Context) error {
	r.storms.Stop()
	r.mover.Stop()
	r.spend.Stop()
	for _, s := range r.submitters {
		s.Stop()
	}
	if r.retention != nil {
		r.retention.Stop()
	}
	err := r.river.Stop(ctx)
	if err != nil {
		hard, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = r.river.StopAndCancel(hard)
	}
	r.supervisor.Stop()
	if ctx.Err() != nil {
		// Stopped with no time left (a kill): no goodbye, the heartbeat
		// rows expire by themselves as a dead process's do.
		r.pacers.Crash()
	} else {
		leave, cancelLeave := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		r.pacers.Stop(leave)
		cancelLeave()
	}
	if ctx.Err() == nil {
		// A batch that settled since the last spend tick (the one a
		// `triage run` waited for) is announced before the process goes.
		announce, cancelAnnounce := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if _, err := settled.Announce(announce, r.pool, r.alerter); err != nil {
			r.log.WarnContext(ctx, "announce settled batches", "err", err)
		}
		cancelAnnounce()
	}
	if r.ownAlerter {
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = r.alerter.Close(flush)
	}
	return err
}

// Sweep runs both sweeps now (sweep.Sweeper.Now), the stuck-batch one
// without waiting for batches to be quiet: for a process about to exit,
// such as `triage work --exit-when-idle` with nothing left to run.
func (r *Runtime) Sweep(ctx context.Context) { r.sweeper.Now(ctx) }
