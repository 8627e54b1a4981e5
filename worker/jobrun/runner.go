package jobrun

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/keys"
)

// Config is what a job's run needs. worker.New builds it from
// worker.Options (whose defaults are resolved there: worker.Options.WithDefaults)
// and the state the Runtime owns.
type Config struct {
	// Config is the parsed triage.toml. Required.
	Config *config.Config
	// Pool reaches triage's and River's tables. Required.
	Pool *pgxpool.Pool
	// Schema is River's schema ("": the connection's search_path).
	Schema string
	// Logger. Required.
	Logger *slog.Logger
	// Store is the shared key state. Required.
	Store *keys.Store
	// Alerter raises alerts. Required.
	Alerter *keys.Alerter
	// Keys are the keys this process works, by name.
	Keys map[string]*Key
	// Reconcile brings a key's queues in line with its shared state now
	// (keys.Supervisor.Reconcile). Required.
	Reconcile func(ctx context.Context, key string) error
	// Clock and HostClock: see worker.Options.
	Clock, HostClock keys.Clock
	// The waits and bounds of worker.Options of the same names.
	BackoffBase, BackoffCap, BatchWait, BudgetRecheck, HoldAnswer time.Duration
	JobMargin, KeyPauseAfter, MaxAge, RetryDefer                  time.Duration
	// RetryBudget is the fleet retry budget (worker.Options.RetryBudget).
	RetryBudget decide.RetryBudget
	// Observer hears about every call. Optional.
	Observer Observer
	// RequeueDeadLetters: see worker.Options. Optional.
	RequeueDeadLetters func(ctx context.Context, ids []int64) (int, error)
}

// Runner runs one job at a time per River worker slot; it is safe for
// concurrent use.
type Runner struct {
	opts    Config
	cfg     *config.Config
	pool    *pgxpool.Pool
	log     *slog.Logger
	store   *keys.Store
	alerter *keys.Alerter
	keys    map[string]*Key
	// workCtx, set by tests only, wraps the context of every run
	// (jobWorker.Work): a test tells a job's database round trips from
	// the process's others by it.
	workCtx func(ctx context.Context, jobID int64) context.Context
	// group is the answers waiting for the commit in flight
	// (groupcommit.go).
	group      groupCommit
	groupHooks *groupHooks // tests only
	watchHooks *watchHooks // tests only
}

// New builds a Runner.
func New(c Config) (*Runner, error) {
	if c.Config == nil || c.Pool == nil || c.Logger == nil || c.Store == nil || c.Alerter == nil || c.Reconcile == nil {
		return nil, errors.New("jobrun: Config, Pool, Logger, Store, Alerter and Reconcile are required")
	}
	return &Runner{opts: c, cfg: c.Config, pool: c.Pool, log: c.Logger, store: c.Store, alerter: c.Alerter, keys: c.Keys}, nil
}

// Worker is River's worker for the jobs this Runner runs.
func (r *Runner) Worker() river.Worker[jobargs.Args] { return &jobWorker{rt: r} }

// Now is this host's time: Config.HostClock, else Config.Clock, else the
// system clock.
func (r *Runner) Now() time.Time { return r.now() }

// SetWorkContext wraps the context of every run of a job (tests, before
// the runtime starts).
func (r *Runner) SetWorkContext(f func(ctx context.Context, jobID int64) context.Context) {
	r.workCtx = f
}

// SetGroupHooks sets the group commit's test signals before the runtime
// starts: waiting hears the number of answers waiting after one joins
// (under the group's lock), settle each group's size before its
// transaction, batch (if set) each group's batch of two or more before
// it is sent (a test makes it fail).
func (r *Runner) SetGroupHooks(waiting, settle func(n int), batch func(*pgx.Batch)) {
	r.groupHooks = &groupHooks{waiting: waiting, settle: settle, batch: batch}
}

// SetWatchHooks sets the safety net's test signals before the runner's
// jobs run: tripped runs in a call past a hold's threshold right after its
// trip of the key's breaker (opened: it opened the hold), before the
// opener alerts; decided after every failed call's safety-net decision,
// with the hold its record is part of ("" for none).
func (r *Runner) SetWatchHooks(tripped func(record string, opened bool), decided func(record, hold string)) {
	r.watchHooks = &watchHooks{tripped: tripped, decided: decided}
}

// alertOnce raises a, keyed to key, once for the fleet under the claim
// kind (keys.Alerter.AlertOnce).
func (r *Runner) alertOnce(ctx context.Context, key, kind string, a keys.Alert) {
	a.Key = key
	r.alerter.AlertOnce(ctx, r.pool, kind, a)
}
