package metrics

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
)

// breakerValue maps a breaker state to triage_breaker_state's value.
func breakerValue(s keys.State) float64 {
	switch s {
	case keys.StateHalfOpen:
		return 1
	case keys.StateOpen:
		return 2
	default:
		return 0
	}
}

// stateCollector reads the fleet's shared state at scrape time: the breaker
// and pause of every key from keys.Store, the spend from the ledger.
type stateCollector struct {
	pool  *pgxpool.Pool
	store *keys.Store
	opts  Options

	breaker, paused, spend, up *prometheus.Desc
}

func newStateCollector(pool *pgxpool.Pool, store *keys.Store, opts Options) *stateCollector {
	return &stateCollector{
		pool: pool, store: store, opts: opts,
		breaker: prometheus.NewDesc("triage_breaker_state",
			"Circuit breaker of the key, fleet-wide from the shared key state: 0 closed, 1 half_open, 2 open.",
			[]string{"key"}, nil),
		paused: prometheus.NewDesc("triage_key_paused",
			"1 when the key has an active pause (operator or throttle), fleet-wide from the shared key state; else 0.",
			[]string{"key"}, nil),
		spend: prometheus.NewDesc("triage_key_spend_usd",
			"Spend in USD recorded in the ledger for the key: fleet-wide, every process's calls, unlike the per-process triage_spend_usd_total.",
			[]string{"key"}, nil),
		up: prometheus.NewDesc("triage_shared_state_up",
			"1 when this scrape read the key state and the ledger; 0 when it could not, and the fleet-wide gauges are missing.",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.breaker
	ch <- c.paused
	ch <- c.spend
	ch <- c.up
}

type keyGauges struct {
	state  keys.State
	paused bool
	spend  float64
}

// Collect implements prometheus.Collector. It reads everything before it
// sends anything, so a scrape has all the fleet-wide gauges or none.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ScrapeTimeout)
	defer cancel()
	byKey, err := c.read(ctx)
	if err != nil {
		c.opts.Logger.Warn("metrics: shared state unreadable", "error", err)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	names := make([]string, 0, len(byKey))
	for k := range byKey {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		g := byKey[k]
		paused := 0.0
		if g.paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.breaker, prometheus.GaugeValue, breakerValue(g.state), k)
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, paused, k)
		ch <- prometheus.MustNewConstMetric(c.spend, prometheus.GaugeValue, g.spend, k)
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
}

func (c *stateCollector) read(ctx context.Context) (map[string]*keyGauges, error) {
	byKey := map[string]*keyGauges{}
	for _, k := range c.opts.Keys {
		byKey[k] = &keyGauges{state: keys.StateClosed}
	}
	statuses, err := c.store.ListKeyStatus(ctx)
	if err != nil {
		return nil, err
	}
	for _, st := range statuses {
		byKey[st.Key] = &keyGauges{state: st.State, paused: st.Pause != nil}
	}
	for k, g := range byKey {
		if g.spend, err = ledger.SpendByKey(ctx, c.pool, k, c.opts.SpendSince); err != nil {
			return nil, err
		}
	}
	return byKey, nil
}
