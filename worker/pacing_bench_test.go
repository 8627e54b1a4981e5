package worker_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker"
)

// paceShape is one provider a pacing benchmark runs against.
type paceShape struct {
	name        string
	rpm, tpm    int
	burstReq    int
	burstTok    int
	latency     time.Duration
	concurrency int
	// padding makes each record's prompt about this many bytes longer, so
	// that the token limit binds.
	padding int
}

var paceShapes = []paceShape{
	{name: "30rps_200ms_c32", rpm: 30 * 60, burstReq: 15, latency: 200 * time.Millisecond, concurrency: 32},
	{name: "100rps_50ms_c16", rpm: 100 * 60, burstReq: 50, latency: 50 * time.Millisecond, concurrency: 16},
	// About 100 input tokens a request; 240,000 TPM is 40 requests/s,
	// under the 100 requests/s of the request limit.
	{name: "tpm_40rps_100ms_c16", rpm: 100 * 60, tpm: 240000, burstReq: 50, burstTok: 2000, latency: 100 * time.Millisecond, concurrency: 16, padding: 360},
}

const (
	paceWarmup  = 3 * time.Second
	paceMeasure = 12 * time.Second
)

// BenchmarkPacing runs 1 and 2 worker processes (Runtimes on one database)
// against the fake provider's rate limit, with and without its rate-limit
// headers, and reports ratios: limit_share, the completed requests (for the
// token-bound shape: input tokens) per second over the measured window
// divided by the limit; throttled_share, the 429s among the requests of the
// measured window; throttled_share_run, the same over the whole run, the
// warm-up's search for the limit included. The bar: limit_share ≥ 0.9 and
// throttled_share ≤ 0.05 in every shape.
func BenchmarkPacing(b *testing.B) {
	for _, shape := range paceShapes {
		for _, headers := range []bool{true, false} {
			for _, procs := range []int{1, 2} {
				name := fmt.Sprintf("%s/headers=%t/procs=%d", shape.name, headers, procs)
				b.Run(name, func(b *testing.B) {
					for b.Loop() {
						limitShare, throttled, throttledRun := runPacing(b, shape, headers, procs)
						b.ReportMetric(limitShare, "limit_share")
						b.ReportMetric(throttled, "throttled_share")
						b.ReportMetric(throttledRun, "throttled_share_run")
					}
				})
			}
		}
	}
}

func runPacing(b *testing.B, shape paceShape, headers bool, procs int) (limitShare, throttledShare, throttledRun float64) {
	b.Helper()
	sc := fakeprovider.Scenario{
		RateLimit: &fakeprovider.RateLimit{RequestsPerMinute: shape.rpm, TokensPerMinute: shape.tpm,
			BurstRequests: shape.burstReq, BurstTokens: shape.burstTok, NoHeaders: !headers},
		Latency: fakeprovider.Duration(shape.latency),
	}
	tb := setup(b, sc, tweaks{concurrency: shape.concurrency, timeout: "30s"})
	limit := float64(shape.rpm) / 60
	if shape.tpm > 0 {
		limit = min(limit, float64(shape.tpm)/60/100)
	}
	n := int(limit*(paceWarmup+paceMeasure).Seconds()*1.3) + 4*shape.concurrency*procs
	var extra func(int) string
	if shape.padding > 0 {
		pad := strings.Repeat("x", shape.padding)
		extra = func(int) string { return `,"pad":"` + pad + `"` }
	}
	tb.enqueue(b, "bench", records(n, extra))
	var rts []*worker.Runtime
	for i := range procs {
		saved := tb.opts
		tb.opts.ID = fmt.Sprintf("bench-%d", i)
		rts = append(rts, tb.newRuntime(b))
		tb.opts = saved
	}
	for _, rt := range rts {
		tb.run(b, rt)
	}
	trace := func(d time.Duration) {
		if os.Getenv("TRIAGE_PACE_TRACE") == "" {
			waitFor(d)
			return
		}
		for end := time.Now().Add(d); time.Now().Before(end); {
			waitFor(250 * time.Millisecond)
			st := tb.fake.Stats()
			line := fmt.Sprintf("ok=%d 429=%d", st.ByStatus[200], st.ByStatus[429])
			for _, rt := range rts {
				ps, _ := rt.Pacing("main")
				line += fmt.Sprintf(" | %s rate=%.1f share=%.1f live=%d thr=%d bind=%t", ps.Source, ps.FleetRate, ps.ShareRate, ps.Live, ps.Throttles, ps.Binding)
			}
			fmt.Fprintln(os.Stderr, line)
		}
	}
	trace(paceWarmup)
	s0 := tb.fake.Stats()
	trace(paceMeasure)
	s1 := tb.fake.Stats()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, rt := range rts {
		_ = rt.Stop(ctx)
	}
	if shape.tpm > 0 {
		tokens := float64(s1.InputTokens - s0.InputTokens)
		limitShare = tokens / paceMeasure.Seconds() / (float64(shape.tpm) / 60)
	} else {
		limitShare = float64(s1.ByStatus[200]-s0.ByStatus[200]) / paceMeasure.Seconds() / limit
	}
	throttledShare = float64(s1.ByStatus[429]-s0.ByStatus[429]) / float64(max(1, s1.Requests-s0.Requests))
	throttledRun = float64(s1.ByStatus[429]) / float64(max(1, s1.Requests))
	require.Zero(b, len(tb.deadLetters(b, "bench")), "no record may be dead-lettered by pacing")
	return limitShare, throttledShare, throttledRun
}

// waitFor lets real time pass while the workers run (a benchmark measures a
// window of time; no test waits like this).
func waitFor(d time.Duration) {
	<-time.After(d)
}
