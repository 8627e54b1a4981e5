package metrics

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/keys"
)

// Defaults for Options.
const (
	// HealthTimeoutDefault bounds the database ping behind /healthz.
	HealthTimeoutDefault = 2 * time.Second
	// ScrapeTimeoutDefault bounds the database reads of one scrape (key
	// state, ledger spend, batch and retry budgets).
	ScrapeTimeoutDefault = 5 * time.Second
	// ShutdownTimeoutDefault is how long Serve waits for requests in flight
	// once its context ends.
	ShutdownTimeoutDefault = 5 * time.Second
)

// durationBucketsDefault spans a fast error (100 ms) to a long completion
// (5 min), in seconds.
var durationBucketsDefault = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}

// Options configure a Metrics.
type Options struct {
	// Keys are the key names whose gauges are always reported, closed and
	// unpaused included: pass every key of the configuration, not only the
	// ones this process works, since the gauges are fleet-wide. Keys with
	// breaker or pause state are reported whether listed or not. Default:
	// only those.
	Keys []string
	// SpendSince is the start of the window triage_key_spend_usd sums.
	// Default zero: the whole ledger.
	SpendSince time.Time
	// RetryBudgets maps a key name to its retry_budget from the
	// configuration (config.Key.RetryBudget, defaults applied): the keys
	// whose triage_retry_budget_open and triage_retry_budget_allowed are
	// reported, over RetryBudget's window with its floor, as the worker's
	// own check
	// reads them. Pass every key of the configuration. Default nil: no retry
	// budget gauges. New copies the map.
	RetryBudgets map[string]float64
	// RetryBudget is the fleet retry budget's shape the worker runs with
	// (worker.Options.RetryBudget). Default decide.RetryBudgetDefault.
	RetryBudget decide.RetryBudget
	// Logger reports scrapes that could not read the database. Default
	// slog.Default().
	Logger *slog.Logger
	// HealthTimeout: see HealthTimeoutDefault.
	HealthTimeout time.Duration
	// ScrapeTimeout: see ScrapeTimeoutDefault.
	ScrapeTimeout time.Duration
	// ShutdownTimeout: see ShutdownTimeoutDefault.
	ShutdownTimeout time.Duration
	// DurationBuckets of triage_call_duration_seconds, in seconds. Default
	// 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300.
	DurationBuckets []float64
}

// WithDefaults returns o with zero values replaced by the defaults: the
// one place Options' defaults are resolved. A negative value is left as it
// is, for New to refuse.
func (o Options) WithDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.HealthTimeout = cmp.Or(o.HealthTimeout, HealthTimeoutDefault)
	o.ScrapeTimeout = cmp.Or(o.ScrapeTimeout, ScrapeTimeoutDefault)
	o.ShutdownTimeout = cmp.Or(o.ShutdownTimeout, ShutdownTimeoutDefault)
	if len(o.DurationBuckets) == 0 {
		o.DurationBuckets = append([]float64(nil), durationBucketsDefault...)
	}
	o.RetryBudgets = maps.Clone(o.RetryBudgets)
	o.RetryBudget = o.RetryBudget.WithDefaults()
	return o
}

// validate refuses what no default can stand for, naming the option: a
// negative timeout or retry budget, duration buckets that do not increase.
func (o Options) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"HealthTimeout", o.HealthTimeout}, {"ScrapeTimeout", o.ScrapeTimeout}, {"ShutdownTimeout", o.ShutdownTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("metrics: Options.%s must not be negative, got %s (0 takes the default)", d.name, d.v)
		}
	}
	if err := o.RetryBudget.Validate(); err != nil {
		return fmt.Errorf("metrics: Options.%w", err)
	}
	for i, b := range o.DurationBuckets {
		if math.IsNaN(b) || i > 0 && b <= o.DurationBuckets[i-1] {
			return fmt.Errorf("metrics: Options.DurationBuckets must increase, got %v", o.DurationBuckets)
		}
	}
	return nil
}

// Metrics counts one process's calls and reports the fleet's key state. It
// is a worker.Observer and safe for concurrent use.
type Metrics struct {
	opts    Options
	pool    *pgxpool.Pool
	reg     *prometheus.Registry
	handler http.Handler

	calls    *prometheus.CounterVec
	retries  *prometheus.CounterVec
	unknown  *prometheus.CounterVec
	spend    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	holds    *prometheus.CounterVec
}

var _ worker.Observer = (*Metrics)(nil)

// New builds a Metrics on its own registry. pool answers /healthz and the
// ledger reads; store gives the breaker and pause state. It refuses
// options no default can stand for (a negative timeout, buckets that do
// not increase), naming the option.
func New(pool *pgxpool.Pool, store *keys.Store, opts Options) (*Metrics, error) {
	opts = opts.WithDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	m := &Metrics{
		opts: opts,
		pool: pool,
		reg:  prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "triage_calls_total",
			Help: "Provider calls made by this process, by key, classifier class and HTTP status (\"0\": no status line arrived).",
		}, []string{"key", "class", "status"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "triage_retries_total",
			Help: "Provider calls made by this process that were not the record's first call, by key and class.",
		}, []string{"key", "class"}),
		unknown: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "triage_unknown_errors_total",
			Help: "Provider calls made by this process that no classifier rule matched, by key.",
		}, []string{"key"}),
		spend: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "triage_spend_usd_total",
			Help: "Billed cost in USD of the calls made by this process since it started, by key (see triage_key_spend_usd for the fleet's).",
		}, []string{"key"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "triage_call_duration_seconds",
			Help:    "Duration of provider calls made by this process, by key and class.",
			Buckets: opts.DurationBuckets,
		}, []string{"key", "class"}),
	}
	m.holds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "triage_safety_net_holds_total",
		Help: "Holds the safety net set from this process (a rejection streak or a throttle wall held the key), by key and hold.",
	}, []string{"key", "hold"})
	// Series of configured keys exist from the start, so rate() and
	// increase() see their first events.
	for _, k := range opts.Keys {
		m.unknown.WithLabelValues(k)
		m.spend.WithLabelValues(k)
	}
	m.reg.MustRegister(
		m.calls, m.retries, m.unknown, m.spend, m.duration, m.holds,
		newStateCollector(pool, store, opts),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.handler = m.newHandler()
	return m, nil
}

// Registry is the Metrics' own registry, for callers that add collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

var _ worker.HoldObserver = (*Metrics)(nil)

// ObserveHold counts a hold the safety net set (worker.HoldObserver).
func (m *Metrics) ObserveHold(key, hold string) { m.holds.WithLabelValues(key, hold).Inc() }

// ObserveCall counts one finished call (worker.Observer).
func (m *Metrics) ObserveCall(c worker.CallEvent) {
	m.calls.WithLabelValues(c.Key, c.Class.String(), strconv.Itoa(c.Status)).Inc()
	if c.Retry {
		m.retries.WithLabelValues(c.Key, c.Class.String()).Inc()
	}
	if !c.Known {
		m.unknown.WithLabelValues(c.Key).Inc()
	}
	spend := m.spend.WithLabelValues(c.Key)
	if c.CostUSD > 0 && !math.IsInf(c.CostUSD, 0) {
		spend.Add(c.CostUSD)
	}
	m.duration.WithLabelValues(c.Key, c.Class.String()).Observe(c.Elapsed.Seconds())
}
