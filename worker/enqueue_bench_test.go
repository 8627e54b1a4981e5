package worker_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/workertest"
)

// benchEnqueueRecords is the size of BenchmarkEnqueueVsInsertManyFast's
// file: TRIAGE_BENCH_ENQUEUE, default 1,000,000.
func benchEnqueueRecords() int {
	if n, err := strconv.Atoi(os.Getenv("TRIAGE_BENCH_ENQUEUE")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// benchRecord is record i of the benchmark file: about 120 bytes.
func benchRecord(i int) string {
	return fmt.Sprintf(`{"id":"r%07d","name":"Company number %d","text":"a short description of the company, %07d"}`, i, i, i)
}

// jsonlGen is an io.Reader of n benchmark records, made as they are read:
// the file is never in memory, so the enqueue's own footprint is measured.
type jsonlGen struct {
	n, i int
	buf  []byte
}

func (g *jsonlGen) Read(p []byte) (int, error) {
	for len(g.buf) < len(p) && g.i < g.n {
		g.i++
		g.buf = append(g.buf, benchRecord(g.i)...)
		g.buf = append(g.buf, '\n')
	}
	if len(g.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

// resetPeakRSS resets this process's peak RSS (VmHWM), so peakRSS reads
// the peak of what runs after; false where the kernel does not allow it.
func resetPeakRSS() bool { return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil }

// peakRSS is this process's VmHWM in bytes (0 if unknown).
func peakRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return float64(kb) * 1024
		}
	}
	return 0
}

// benchEnqueueRounds is how many rounds BenchmarkEnqueueVsInsertManyFast
// runs: TRIAGE_BENCH_ENQUEUE_ROUNDS, default 3.
func benchEnqueueRounds() int {
	if n, err := strconv.Atoi(os.Getenv("TRIAGE_BENCH_ENQUEUE_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 3
}

// BenchmarkEnqueueVsInsertManyFast streams TRIAGE_BENCH_ENQUEUE records
// (default 1,000,000 of about 120 B) through enqueue.JSONL, and
// inserts the same jobs with River's InsertManyFast (COPY, one call) into a
// schema of its own, TRIAGE_BENCH_ENQUEUE_ROUNDS rounds (default 3) in the
// same run. It reports the median
// rows/s ratio (enqueue/InsertManyFast) with its lowest and highest, and
// the enqueue's peak RSS (the process's VmHWM, reset before each enqueue;
// the highest of the rounds).
func BenchmarkEnqueueVsInsertManyFast(b *testing.B) {
	n, rounds := benchEnqueueRecords(), benchEnqueueRounds()
	for b.Loop() {
		var ratios, enqRates, bareRates []float64
		var rss float64
		for r := range rounds {
			enqRate, enqRSS := runEnqueue(b, n, r)
			bareRate := runInsertManyFast(b, n)
			ratios = append(ratios, enqRate/bareRate)
			enqRates, bareRates = append(enqRates, enqRate), append(bareRates, bareRate)
			rss = max(rss, enqRSS)
		}
		slices.Sort(ratios)
		b.ReportMetric(median(enqRates), "enqueue_rows/s")
		b.ReportMetric(median(bareRates), "insertmanyfast_rows/s")
		b.ReportMetric(ratios[rounds/2], "ratio_median")
		b.ReportMetric(ratios[0], "ratio_min")
		b.ReportMetric(ratios[rounds-1], "ratio_max")
		b.ReportMetric(rss/(1<<20), "enqueue_peak_rss_MB")
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func runEnqueue(b *testing.B, n, round int) (rate, rss float64) {
	b.Helper()
	tb := setup(b, fakeprovider.Scenario{}, tweaks{})
	debug.FreeOSMemory() // what the previous round left is not the enqueue's
	if !resetPeakRSS() {
		b.Log("cannot reset the peak RSS: enqueue_peak_rss_MB includes what ran before")
	}
	start := time.Now()
	got, err := enqueue.JSONL(context.Background(), tb.db.Pool, tb.db.Schema, tb.cfg,
		enqueue.Params{Pipeline: workertest.Pipeline, Batch: fmt.Sprintf("bench-%d", round), File: "bench.jsonl"}, &jsonlGen{n: n})
	elapsed := time.Since(start)
	require.NoError(b, err)
	require.Equal(b, n, got)
	return float64(n) / elapsed.Seconds(), peakRSS()
}

func runInsertManyFast(b *testing.B, n int) float64 {
	b.Helper()
	tb := setup(b, fakeprovider.Scenario{}, tweaks{})
	pl, err := tb.cfg.Pipeline(workertest.Pipeline)
	require.NoError(b, err)
	key, _, err := tb.cfg.KeyFor(pl.Name)
	require.NoError(b, err)
	rc, err := river.NewClient(riverpgxv5.New(tb.db.Pool), &river.Config{Schema: tb.db.Schema})
	require.NoError(b, err)
	opts := &river.InsertOpts{Queue: keys.QueueName(key.Name), MaxAttempts: jobargs.RiverMaxAttempts(pl)}
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{
			Args:       jobargs.Args{Batch: "bench", Pipeline: pl.Name, RecordID: fmt.Sprintf("r%07d", i+1), Record: []byte(benchRecord(i + 1))},
			InsertOpts: opts,
		}
	}
	start := time.Now()
	got, err := rc.InsertManyFast(context.Background(), params)
	elapsed := time.Since(start)
	require.NoError(b, err)
	require.Equal(b, n, got)
	return float64(n) / elapsed.Seconds()
}
