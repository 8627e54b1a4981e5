package worker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// benchFetchCooldown is short so neither side is bound by River's fetch loop
// (at the default 100 ms every worker tops out at MaxWorkers jobs a tick and
// the ratio would say nothing).
const (
	benchFetchCooldown = 2 * time.Millisecond
	benchWorkers       = 16
)

// bareArgs is the baseline: the minimal equivalent of a triage call without
// the call — one ledger-like row and JobCompleteTx per job.
type bareArgs struct {
	N int `json:"n"`
}

func (bareArgs) Kind() string { return "bench_bare" }

type bareWorker struct {
	river.WorkerDefaults[bareArgs]
	pool *pgxpool.Pool
}

func (w *bareWorker) Work(ctx context.Context, job *river.Job[bareArgs]) error {
	t, err := w.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer t.Rollback(ctx) //nolint:errcheck
	if _, err := t.Exec(ctx, "INSERT INTO bench_row (job_id, n) VALUES ($1, $2)", job.ID, job.Args.N); err != nil {
		return err
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, t, job); err != nil {
		return err
	}
	return t.Commit(ctx)
}

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchJobs() int {
	if n, err := strconv.Atoi(os.Getenv("TRIAGE_BENCH_JOBS")); err == nil && n > 0 {
		return n
	}
	return 2000
}

// BenchmarkWorkerVsBareRiver runs the same number of jobs through the full
// triage path (render, ledger intent, fake provider at zero latency,
// classify, result + JobCompleteTx) and through a bare River worker doing one
// row and JobCompleteTx, in the same process, and reports both rates and
// their ratio. Run it with `make bench`; compare ratios, not absolute rates.
func BenchmarkWorkerVsBareRiver(b *testing.B) {
	n := benchJobs()
	for b.Loop() {
		bareRate, bareCPU := runBare(b, n)
		fullRate, fullCPU := runFull(b, n)
		b.ReportMetric(bareRate, "bare_jobs/s")
		b.ReportMetric(fullRate, "triage_jobs/s")
		b.ReportMetric(fullRate/bareRate, "throughput_ratio")
		b.ReportMetric(float64(bareCPU.Microseconds())/float64(n), "bare_cpu_us/job")
		b.ReportMetric(float64(fullCPU.Microseconds())/float64(n), "triage_cpu_us/job")
		b.ReportMetric(float64(fullCPU)/float64(bareCPU), "cpu_ratio")
	}
}

func runBare(b *testing.B, n int) (rate float64, cpu time.Duration) {
	b.Helper()
	tb := setup(b, fakeprovider.Scenario{}, tweaks{})
	ctx := context.Background()
	_, err := tb.db.Pool.Exec(ctx, "CREATE TABLE bench_row (job_id bigint PRIMARY KEY, n int, at timestamptz DEFAULT now())")
	require.NoError(b, err)
	workers := river.NewWorkers()
	river.AddWorker(workers, &bareWorker{pool: tb.db.Pool})
	rc, err := river.NewClient(riverpgxv5.New(tb.db.Pool), &river.Config{
		Schema: tb.db.Schema, Workers: workers, FetchCooldown: benchFetchCooldown,
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: benchWorkers}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(b, err)
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: bareArgs{N: i}}
	}
	_, err = rc.InsertManyFast(ctx, params)
	require.NoError(b, err)
	done, cancel := rc.Subscribe(river.EventKindJobCompleted)
	defer cancel()
	start, cpu0 := time.Now(), cpuTime()
	require.NoError(b, rc.Start(ctx))
	waitEvents(b, done, n)
	elapsed, used := time.Since(start), cpuTime()-cpu0
	require.NoError(b, rc.Stop(ctx))
	return float64(n) / elapsed.Seconds(), used
}

func runFull(b *testing.B, n int) (rate float64, cpu time.Duration) {
	b.Helper()
	tb := setup(b, fakeprovider.Scenario{}, tweaks{concurrency: benchWorkers})
	tb.opts.FetchCooldown = benchFetchCooldown
	tb.enqueue(b, "bench", records(n, nil))
	rt := tb.newRuntime(b)
	done, cancel := rt.River().Subscribe(river.EventKindJobCompleted)
	defer cancel()
	start, cpu0 := time.Now(), cpuTime()
	tb.run(b, rt)
	waitEvents(b, done, n)
	elapsed, used := time.Since(start), cpuTime()-cpu0
	st := tb.status(b, "bench")
	require.Equal(b, n, st.Completed, fmt.Sprintf("%+v", st))
	return float64(n) / elapsed.Seconds(), used
}

func waitEvents(b *testing.B, events <-chan *river.Event, n int) {
	b.Helper()
	timeout := time.After(5 * time.Minute)
	for seen := 0; seen < n; {
		select {
		case <-events:
			seen++
		case <-timeout:
			b.Fatalf("only %d of %d jobs completed in 5 minutes", seen, n)
		}
	}
}

// BenchmarkWorkFetch runs TRIAGE_BENCH_WORK jobs (default 5,000) end to end
// through a worker process at concurrency 16 against the fake provider at
// zero latency, twice in the same run: with River's default fetch cooldown
// (100 ms, what every key had before fetch_cooldown) and with the key's
// derived fetch_cooldown (config.FetchCooldownFor). It reports both rates
// and their ratio.
func BenchmarkWorkFetch(b *testing.B) {
	n := 5000
	if v, err := strconv.Atoi(os.Getenv("TRIAGE_BENCH_WORK")); err == nil && v > 0 {
		n = v
	}
	for b.Loop() {
		before := runWork(b, n, 100*time.Millisecond)
		after := runWork(b, n, 0)
		b.ReportMetric(before, "river_default_jobs/s")
		b.ReportMetric(after, "derived_jobs/s")
		b.ReportMetric(after/before, "speedup")
	}
}

// runWork is runFull with River's defaults but for the fetch cooldown
// (0: the key's fetch_cooldown).
func runWork(b *testing.B, n int, cooldown time.Duration) float64 {
	b.Helper()
	tb := setup(b, fakeprovider.Scenario{}, tweaks{concurrency: benchWorkers})
	tb.opts.FetchCooldown, tb.opts.FetchPollInterval = cooldown, 0
	tb.opts.Logger = slog.New(slog.DiscardHandler)
	tb.enqueue(b, "bench", records(n, nil))
	rt := tb.newRuntime(b)
	done, cancel := rt.River().Subscribe(river.EventKindJobCompleted)
	defer cancel()
	start := time.Now()
	tb.run(b, rt)
	waitEvents(b, done, n)
	return float64(n) / time.Since(start).Seconds()
}
