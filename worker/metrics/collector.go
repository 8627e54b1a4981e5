package metrics

import (
	"context"
	"maps"
	"slices"
	"time"

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
// and pause of every key from keys.Store; the spend, the batch budgets and
// pauses, and the retry budgets from the ledger.
type stateCollector struct {
	pool  *pgxpool.Pool
	store *keys.Store
	opts  Options

	breaker, paused, spend, up           *prometheus.Desc
	storm, stormCooldown                 *prometheus.Desc
	held                                 *prometheus.Desc
	batchBudget, batchSpend, batchPaused *prometheus.Desc
	retryOpen, retryAllowed              *prometheus.Desc
	paceRate, paceShare, paceTokens      *prometheus.Desc
	paceLive, paceSource                 *prometheus.Desc
	rlLimit, rlRemaining                 *prometheus.Desc
}

func newStateCollector(pool *pgxpool.Pool, store *keys.Store, opts Options) *stateCollector {
	return &stateCollector{
		pool: pool, store: store, opts: opts,
		breaker: prometheus.NewDesc("triage_breaker_state",
			"Circuit breaker of the key, fleet-wide from the shared key state: 0 closed, 1 half_open, 2 open.",
			[]string{"key"}, nil),
		storm: prometheus.NewDesc("triage_storm_breaker_state",
			"Storm breaker of the key (tripped by transient failures, heals through probes), fleet-wide from the shared key state: 0 closed, 1 half_open, 2 open.",
			[]string{"key"}, nil),
		stormCooldown: prometheus.NewDesc("triage_storm_cooldown_seconds",
			"Wait before the storm breaker's next probe while it is not closed (doubles with every failed probe up to storm_probe_max); 0 when closed.",
			[]string{"key"}, nil),
		held: prometheus.NewDesc("triage_key_held",
			"1 when the safety net holds the key (a rejection streak or a throttle wall: a suspected account problem the classifier did not know), by key and hold; else 0. Fleet-wide from the shared key state.",
			[]string{"key", "hold"}, nil),
		paused: prometheus.NewDesc("triage_key_paused",
			"1 when the key has an active pause (operator or throttle), fleet-wide from the shared key state; else 0.",
			[]string{"key"}, nil),
		spend: prometheus.NewDesc("triage_key_spend_usd",
			"Spend in USD recorded in the ledger for the key: fleet-wide, every process's calls, unlike the per-process triage_spend_usd_total.",
			[]string{"key"}, nil),
		up: prometheus.NewDesc("triage_shared_state_up",
			"1 when this scrape read the key state and the ledger; 0 when it could not, and the fleet-wide gauges are missing.",
			nil, nil),
		batchBudget: prometheus.NewDesc("triage_batch_budget_usd",
			"Spend cap in USD of a batch that has one and is not settled, fleet-wide from the ledger.",
			[]string{"batch"}, nil),
		batchSpend: prometheus.NewDesc("triage_batch_spend_usd",
			"Billed spend in USD of a batch that has a spend cap and is not settled, fleet-wide from the ledger: what the cap is checked against.",
			[]string{"batch"}, nil),
		batchPaused: prometheus.NewDesc("triage_batch_paused",
			"1 for a batch that is paused and not settled, fleet-wide from the ledger; reason is paused_budget or paused_exhausted. Running batches have no series.",
			[]string{"batch", "reason"}, nil),
		retryOpen: prometheus.NewDesc("triage_retry_budget_open",
			"Retries of the key not yet succeeded (in flight, failed or possibly billed) over the retry window, fleet-wide from the ledger.",
			[]string{"key"}, nil),
		retryAllowed: prometheus.NewDesc("triage_retry_budget_allowed",
			"Open retries the key's retry budget allows over the retry window, fleet-wide from the ledger: max(floor, retry_budget x first calls). Workers defer retries while open >= allowed.",
			[]string{"key"}, nil),
		paceRate: prometheus.NewDesc("triage_pace_rate_per_second",
			"Requests per second the fleet paces the key at, learned from the rate-limit headers or from throttles (the lowest among the live processes); no series while the key is not limited.",
			[]string{"key"}, nil),
		paceShare: prometheus.NewDesc("triage_pace_share_per_second",
			"Requests per second each live worker process paces the key at: triage_pace_rate_per_second / triage_pace_live_processes.",
			[]string{"key"}, nil),
		paceTokens: prometheus.NewDesc("triage_pace_tokens_per_second",
			"Input tokens per second the fleet paces the key at, from a token limit the headers named; no series without one.",
			[]string{"key"}, nil),
		paceLive: prometheus.NewDesc("triage_pace_live_processes",
			"Worker processes with a live pacing heartbeat on the key (they share its rate).",
			[]string{"key"}, nil),
		paceSource: prometheus.NewDesc("triage_pace_source",
			"1 for where the key's rate comes from: headers, throttles or starting (still looking for the limit).",
			[]string{"key", "source"}, nil),
		rlLimit: prometheus.NewDesc("triage_ratelimit_limit",
			"The limit the provider's rate-limit headers named last (per the vendor's window, usually a minute), by key and kind (requests, tokens).",
			[]string{"key", "kind"}, nil),
		rlRemaining: prometheus.NewDesc("triage_ratelimit_remaining",
			"What the provider's rate-limit headers said remained last, by key and kind (requests, tokens).",
			[]string{"key", "kind"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.breaker
	ch <- c.storm
	ch <- c.stormCooldown
	ch <- c.held
	ch <- c.paused
	ch <- c.spend
	ch <- c.up
	ch <- c.batchBudget
	ch <- c.batchSpend
	ch <- c.batchPaused
	ch <- c.retryOpen
	ch <- c.retryAllowed
	ch <- c.paceRate
	ch <- c.paceShare
	ch <- c.paceTokens
	ch <- c.paceLive
	ch <- c.paceSource
	ch <- c.rlLimit
	ch <- c.rlRemaining
}

type keyGauges struct {
	hold   string // the safety net's hold kind, "" none
	state  keys.State
	storm  keys.StormStatus
	paused bool
	spend  float64
}

// snapshot is everything one scrape reads from the database.
type snapshot struct {
	keys    map[string]*keyGauges
	batches []batchGauges
	retries []retryGauges
	pacing  []keys.PacingStatus
}

// Collect implements prometheus.Collector. It reads everything before it
// sends anything, so a scrape has all the fleet-wide gauges or none.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ScrapeTimeout)
	defer cancel()
	snap, err := c.read(ctx, time.Now())
	if err != nil {
		c.opts.Logger.Warn("metrics: shared state unreadable", "error", err)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	for _, k := range slices.Sorted(maps.Keys(snap.keys)) {
		g := snap.keys[k]
		paused := 0.0
		if g.paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.breaker, prometheus.GaugeValue, breakerValue(g.state), k)
		ch <- prometheus.MustNewConstMetric(c.storm, prometheus.GaugeValue, breakerValue(g.storm.State), k)
		ch <- prometheus.MustNewConstMetric(c.stormCooldown, prometheus.GaugeValue, g.storm.CooldownS, k)
		for _, kind := range []string{keys.HoldRejectionStreak, keys.HoldThrottleWall} {
			held := 0.0
			if g.hold == kind {
				held = 1
			}
			ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, held, k, kind)
		}
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, paused, k)
		ch <- prometheus.MustNewConstMetric(c.spend, prometheus.GaugeValue, g.spend, k)
	}
	for _, b := range snap.batches {
		if b.budget != nil {
			ch <- prometheus.MustNewConstMetric(c.batchBudget, prometheus.GaugeValue, *b.budget, b.id)
			ch <- prometheus.MustNewConstMetric(c.batchSpend, prometheus.GaugeValue, b.spent, b.id)
		}
		if b.paused() {
			ch <- prometheus.MustNewConstMetric(c.batchPaused, prometheus.GaugeValue, 1, b.id, string(b.state))
		}
	}
	for _, r := range snap.retries {
		ch <- prometheus.MustNewConstMetric(c.retryOpen, prometheus.GaugeValue, r.open, r.key)
		ch <- prometheus.MustNewConstMetric(c.retryAllowed, prometheus.GaugeValue, r.allowed, r.key)
	}
	for _, p := range snap.pacing {
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{p.Key}, labels...)...)
		}
		gauge(c.paceLive, float64(p.Live))
		gauge(c.paceSource, 1, string(p.Source))
		if p.RatePerS > 0 {
			gauge(c.paceRate, p.RatePerS)
			gauge(c.paceShare, p.ShareRatePerS)
		}
		if p.TokensPerS > 0 {
			gauge(c.paceTokens, p.TokensPerS)
		}
		for _, w := range []struct {
			kind             string
			limit, remaining *int64
		}{{"requests", p.LimitRequests, p.RemainingRequests}, {"tokens", p.LimitTokens, p.RemainingTokens}} {
			if w.limit != nil {
				gauge(c.rlLimit, float64(*w.limit), w.kind)
			}
			if w.remaining != nil {
				gauge(c.rlRemaining, float64(*w.remaining), w.kind)
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
}

func (c *stateCollector) read(ctx context.Context, now time.Time) (snapshot, error) {
	byKey := map[string]*keyGauges{}
	for _, k := range c.opts.Keys {
		byKey[k] = &keyGauges{state: keys.StateClosed}
	}
	statuses, err := c.store.ListKeyStatus(ctx)
	if err != nil {
		return snapshot{}, err
	}
	for _, st := range statuses {
		byKey[st.Key] = &keyGauges{state: st.State, storm: st.Storm, paused: st.Pause != nil}
		if st.Hold != nil {
			byKey[st.Key].hold = st.Hold.Kind
		}
	}
	for k, g := range byKey {
		if g.spend, err = ledger.SpendByKey(ctx, c.pool, k, c.opts.SpendSince); err != nil {
			return snapshot{}, err
		}
	}
	batches, err := readBatches(ctx, c.pool)
	if err != nil {
		return snapshot{}, err
	}
	retries := make([]retryGauges, 0, len(c.opts.RetryBudgets))
	for _, k := range slices.Sorted(maps.Keys(c.opts.RetryBudgets)) {
		r, err := readRetry(ctx, c.pool, c.opts.RetryBudget, k, c.opts.RetryBudgets[k], now)
		if err != nil {
			return snapshot{}, err
		}
		retries = append(retries, r)
	}
	pacing, err := c.store.ListPacing(ctx)
	if err != nil {
		return snapshot{}, err
	}
	return snapshot{keys: byKey, batches: batches, retries: retries, pacing: pacing}, nil
}
