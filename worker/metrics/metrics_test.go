package metrics_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/metrics"
	"github.com/triage-dev/triage/worker/provider"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type testBundle struct {
	db    *dbtest.DB
	store *keys.Store
	m     *metrics.Metrics
	srv   *httptest.Server
}

func setup(t *testing.T, opts metrics.Options) *testBundle {
	t.Helper()
	db := dbtest.New(t)
	store := keys.DefaultStore(db.Pool)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m, err := metrics.New(db.Pool, store, opts)
	require.NoError(t, err)
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	return &testBundle{db: db, store: store, m: m, srv: srv}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// scrape fetches /metrics and parses the text exposition.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code, body)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err)
	return fams
}

// value returns the counter, gauge or untyped value of the series of family
// name whose labels are exactly want; ok false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if !labelsEqual(m.GetLabel(), want) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

func labelsEqual(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, l := range got {
		if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
	}
	return true
}

func mustValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := value(fams, name, labels)
	require.True(t, ok, "no series %s%v", name, labels)
	return v
}

// sum adds every series of a counter family.
func sum(fams map[string]*dto.MetricFamily, name string) float64 {
	var s float64
	if f := fams[name]; f != nil {
		for _, m := range f.GetMetric() {
			s += m.GetCounter().GetValue()
		}
	}
	return s
}

type L = map[string]string

func TestObserveCallCounts(t *testing.T) {
	t.Parallel()
	b := setup(t, metrics.Options{Keys: []string{"main", "spare"}})

	events := []worker.CallEvent{
		{Key: "main", Class: classify.OK, Status: 200, Known: true, CostUSD: 0.25, Elapsed: 300 * time.Millisecond},
		{Key: "main", Class: classify.OK, Status: 200, Known: true, Retry: true, CostUSD: 0.5, Elapsed: 2 * time.Second},
		{Key: "main", Class: classify.Transient, Status: 503, Known: true, Elapsed: 50 * time.Millisecond},
		{Key: "main", Class: classify.Transient, Status: 503, Known: true, Retry: true, Elapsed: 50 * time.Millisecond},
		{Key: "main", Class: classify.Ambiguous, Status: 0, Known: true, Retry: true, Elapsed: 30 * time.Second},
		{Key: "main", Class: classify.Rejected, Status: 418, Known: false, Elapsed: 10 * time.Millisecond},
		{Key: "other", Class: classify.Throttled, Status: 429, Known: true, CostUSD: 0.125, Elapsed: time.Second},
	}
	for _, e := range events {
		b.m.ObserveCall(e)
	}
	fams := scrape(t, b.srv.URL)

	for _, c := range []struct {
		labels L
		want   float64
	}{
		{L{"key": "main", "class": "ok", "status": "200"}, 2},
		{L{"key": "main", "class": "transient", "status": "503"}, 2},
		{L{"key": "main", "class": "ambiguous", "status": "0"}, 1},
		{L{"key": "main", "class": "rejected", "status": "418"}, 1},
		{L{"key": "other", "class": "throttled", "status": "429"}, 1},
	} {
		require.Equal(t, c.want, mustValue(t, fams, "triage_calls_total", c.labels), "calls %v", c.labels)
	}
	require.Len(t, fams["triage_calls_total"].GetMetric(), 5)
	require.Equal(t, float64(len(events)), sum(fams, "triage_calls_total"))

	require.Equal(t, 1.0, mustValue(t, fams, "triage_retries_total", L{"key": "main", "class": "ok"}))
	require.Equal(t, 1.0, mustValue(t, fams, "triage_retries_total", L{"key": "main", "class": "transient"}))
	require.Equal(t, 1.0, mustValue(t, fams, "triage_retries_total", L{"key": "main", "class": "ambiguous"}))
	require.Equal(t, 3.0, sum(fams, "triage_retries_total"))

	require.Equal(t, 1.0, mustValue(t, fams, "triage_unknown_errors_total", L{"key": "main"}))
	require.Equal(t, 0.0, mustValue(t, fams, "triage_unknown_errors_total", L{"key": "spare"}), "configured keys start at zero")

	require.Equal(t, 0.75, mustValue(t, fams, "triage_spend_usd_total", L{"key": "main"}))
	require.Equal(t, 0.125, mustValue(t, fams, "triage_spend_usd_total", L{"key": "other"}))
	require.Equal(t, 0.0, mustValue(t, fams, "triage_spend_usd_total", L{"key": "spare"}))

	// The histogram: counts and sums by key and class, buckets cumulative.
	var okHist *dto.Histogram
	for _, m := range fams["triage_call_duration_seconds"].GetMetric() {
		if labelsEqual(m.GetLabel(), L{"key": "main", "class": "ok"}) {
			okHist = m.GetHistogram()
		}
	}
	require.NotNil(t, okHist)
	require.Equal(t, uint64(2), okHist.GetSampleCount())
	require.InDelta(t, 2.3, okHist.GetSampleSum(), 1e-9)
	for _, bk := range okHist.GetBucket() {
		switch bk.GetUpperBound() {
		case 0.25:
			require.Equal(t, uint64(0), bk.GetCumulativeCount())
		case 0.5, 1:
			require.Equal(t, uint64(1), bk.GetCumulativeCount())
		case 2.5:
			require.Equal(t, uint64(2), bk.GetCumulativeCount())
		}
	}

	// Go and process collectors are on the registry too.
	require.Contains(t, fams, "go_goroutines")
	require.Contains(t, fams, "process_start_time_seconds")
	require.Equal(t, 1.0, mustValue(t, fams, "triage_shared_state_up", L{}))
}

func TestSharedStateGauges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, metrics.Options{Keys: []string{"main", "spare", "quiet"}})

	fams := scrape(t, b.srv.URL)
	for _, k := range []string{"main", "spare", "quiet"} {
		require.Equal(t, 0.0, mustValue(t, fams, "triage_breaker_state", L{"key": k}), "configured, never tripped: closed")
		require.Equal(t, 0.0, mustValue(t, fams, "triage_key_paused", L{"key": k}))
		require.Equal(t, 0.0, mustValue(t, fams, "triage_key_spend_usd", L{"key": k}))
	}

	// Trip main's breaker: open (2).
	adm, err := b.store.Admit(ctx, "main", 0)
	require.NoError(t, err)
	tripped, err := b.store.Trip(ctx, "main", adm, "insufficient_quota", time.Hour)
	require.NoError(t, err)
	require.True(t, tripped)
	// Pause spare; pause an unconfigured key, which is reported too.
	until := time.Now().Add(time.Hour)
	_, err = b.store.Pause(ctx, "spare", "operator", until)
	require.NoError(t, err)
	_, err = b.store.Pause(ctx, "elsewhere", "operator", until)
	require.NoError(t, err)
	// A storm on spare: the other breaker, shown apart.
	rep, err := b.store.StormFailure(ctx, "spare", keys.Admission{}, true, "transient_failures", 2*time.Second)
	require.NoError(t, err)
	require.True(t, rep.Opened)

	// Spend in the ledger, as any process of the fleet writes it.
	require.NoError(t, ledger.CreateBatch(ctx, b.db.Pool, ledger.Batch{ID: "b1", Pipeline: "enrich", Key: "main"},
		[]ledger.Record{{ID: "r1", Line: 1, Data: []byte(`{}`)}, {ID: "r2", Line: 2, Data: []byte(`{}`)}}))
	for i, cost := range []float64{0.0125, 0.25} {
		rec := []string{"r1", "r2"}[i]
		id, err := ledger.BeginAttempt(ctx, b.db.Pool, ledger.Intent{Batch: "b1", RecordID: rec, JobID: int64(i + 1), Attempt: 1,
			Key: "main", Model: "m", IdempotencyKey: "b1/" + rec, RequestHash: "h"})
		require.NoError(t, err)
		require.NoError(t, ledger.FinishAttempt(ctx, b.db.Pool, id, ledger.Outcome{Status: ledger.AttemptOK, Class: classify.OK, HTTPStatus: 200, CostUSD: cost}))
	}

	fams = scrape(t, b.srv.URL)
	require.Equal(t, 2.0, mustValue(t, fams, "triage_breaker_state", L{"key": "main"}))
	require.Equal(t, 0.0, mustValue(t, fams, "triage_key_paused", L{"key": "main"}), "an open breaker is not a pause")
	require.Equal(t, 0.0, mustValue(t, fams, "triage_breaker_state", L{"key": "spare"}))
	require.Equal(t, 2.0, mustValue(t, fams, "triage_storm_breaker_state", L{"key": "spare"}))
	require.Equal(t, 2.0, mustValue(t, fams, "triage_storm_cooldown_seconds", L{"key": "spare"}))
	require.Equal(t, 0.0, mustValue(t, fams, "triage_storm_breaker_state", L{"key": "main"}))
	require.Equal(t, 1.0, mustValue(t, fams, "triage_key_paused", L{"key": "spare"}))
	require.Equal(t, 1.0, mustValue(t, fams, "triage_key_paused", L{"key": "elsewhere"}))
	require.Equal(t, 0.0, mustValue(t, fams, "triage_key_paused", L{"key": "quiet"}))
	require.InDelta(t, 0.2625, mustValue(t, fams, "triage_key_spend_usd", L{"key": "main"}), 1e-9)
	require.Equal(t, 0.0, mustValue(t, fams, "triage_key_spend_usd", L{"key": "spare"}))
	require.Equal(t, 1.0, mustValue(t, fams, "triage_shared_state_up", L{}))

	// The HELP text says where the fleet-wide numbers come from.
	require.Contains(t, fams["triage_key_spend_usd"].GetHelp(), "fleet-wide")
	require.Contains(t, fams["triage_key_spend_usd"].GetHelp(), "ledger")
	require.Contains(t, fams["triage_breaker_state"].GetHelp(), "fleet-wide")

	// The probe: half-open (1) once a probe is admitted.
	b2 := setup(t, metrics.Options{})
	_, err = b2.store.Trip(ctx, "k", keys.Admission{}, "billing", time.Nanosecond)
	require.NoError(t, err)
	probe, err := b2.store.Admit(ctx, "k", 7)
	require.NoError(t, err)
	require.True(t, probe.Probe)
	fams = scrape(t, b2.srv.URL)
	require.Equal(t, 1.0, mustValue(t, fams, "triage_breaker_state", L{"key": "k"}))
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	b := setup(t, metrics.Options{Keys: []string{"main"}})

	code, body := get(t, b.srv.URL+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", strings.TrimSpace(body))

	b.db.Pool.Close()
	code, body = get(t, b.srv.URL+"/healthz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "database unreachable", strings.TrimSpace(body))
	require.NotContains(t, body, b.db.URL)

	// /metrics still answers, with the counters and shared_state_up 0.
	fams := scrape(t, b.srv.URL)
	require.Equal(t, 0.0, mustValue(t, fams, "triage_shared_state_up", L{}))
	require.NotContains(t, fams, "triage_breaker_state")
	require.Contains(t, fams, "go_goroutines")
}

func TestHealthzTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, metrics.Options{HealthTimeout: time.Millisecond})
	// Hold every connection of the pool, so the ping waits for one.
	n := b.db.Pool.Config().MaxConns
	for range n {
		c, err := b.db.Pool.Acquire(context.Background())
		require.NoError(t, err)
		t.Cleanup(c.Release)
	}
	code, body := get(t, b.srv.URL+"/healthz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "database did not answer within 1ms", strings.TrimSpace(body))
}

func TestNotFoundAndMethods(t *testing.T) {
	t.Parallel()
	b := setup(t, metrics.Options{})
	code, _ := get(t, b.srv.URL+"/riverui/")
	require.Equal(t, http.StatusNotFound, code, "River's UI is not embedded")
	resp, err := http.Post(b.srv.URL+"/metrics", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestServe(t *testing.T) {
	t.Parallel()
	b := setup(t, metrics.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.m.ServeListener(ctx, ln) }()

	code, body := get(t, "http://"+ln.Addr().String()+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", strings.TrimSpace(body))

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "a shutdown on ctx is not an error")
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after ctx ended")
	}
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	require.Error(t, err, "the listener is closed")
}

func TestServeErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, metrics.Options{})
	require.ErrorContains(t, b.m.Serve(context.Background(), ""), "no listen address")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	err = b.m.Serve(context.Background(), ln.Addr().String())
	require.ErrorContains(t, err, "metrics: listen")
}

func TestRegistriesAreIndependent(t *testing.T) {
	t.Parallel()
	a := setup(t, metrics.Options{})
	b := setup(t, metrics.Options{})
	a.m.ObserveCall(worker.CallEvent{Key: "main", Class: classify.OK, Status: 200, Known: true})
	require.Equal(t, 1.0, sum(scrape(t, a.srv.URL), "triage_calls_total"))
	require.Equal(t, 0.0, sum(scrape(t, b.srv.URL), "triage_calls_total"))
}

// The pacing gauges come from the live processes' heartbeat rows: the
// fleet's rate, the share per process and the headers' last limit and
// remaining.
func TestPacingGauges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, metrics.Options{Keys: []string{"main"}})
	fams := scrape(t, b.srv.URL)
	require.Nil(t, fams["triage_pace_live_processes"], "no worker heartbeats: no pacing series")

	st := keys.PaceState{Source: keys.PaceHeaders, FleetRate: 29.1, FleetTokens: 1940, Factor: 1, ReqLimit: 30, TokLimit: 2000,
		Headers: provider.ParseRateLimit("openai", map[string]string{
			"x-ratelimit-limit-requests": "1800", "x-ratelimit-remaining-requests": "17",
			"x-ratelimit-limit-tokens": "120000", "x-ratelimit-remaining-tokens": "119000",
		}, time.Now()), HeadersAt: time.Now()}
	for _, owner := range []string{"a", "b"} {
		_, err := b.store.PacerHeartbeat(ctx, "main", owner, st, time.Minute)
		require.NoError(t, err)
	}
	fams = scrape(t, b.srv.URL)
	require.Equal(t, 2.0, mustValue(t, fams, "triage_pace_live_processes", L{"key": "main"}))
	require.InDelta(t, 29.1, mustValue(t, fams, "triage_pace_rate_per_second", L{"key": "main"}), 1e-9)
	require.InDelta(t, 14.55, mustValue(t, fams, "triage_pace_share_per_second", L{"key": "main"}), 1e-9)
	require.InDelta(t, 1940, mustValue(t, fams, "triage_pace_tokens_per_second", L{"key": "main"}), 1e-9)
	require.Equal(t, 1.0, mustValue(t, fams, "triage_pace_source", L{"key": "main", "source": "headers"}))
	require.Equal(t, 1800.0, mustValue(t, fams, "triage_ratelimit_limit", L{"key": "main", "kind": "requests"}))
	require.Equal(t, 17.0, mustValue(t, fams, "triage_ratelimit_remaining", L{"key": "main", "kind": "requests"}))
	require.Equal(t, 120000.0, mustValue(t, fams, "triage_ratelimit_limit", L{"key": "main", "kind": "tokens"}))
	require.Equal(t, 119000.0, mustValue(t, fams, "triage_ratelimit_remaining", L{"key": "main", "kind": "tokens"}))
}
