package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/workertest"
)

// nightBench is BenchmarkNight's shape, from the environment:
// TRIAGE_BENCH_NIGHT records (default 100,000), TRIAGE_BENCH_NIGHT_ROUNDS
// rounds (default 3), the fake provider's TRIAGE_BENCH_NIGHT_LATENCY
// (default 20ms; 0 for none) and TRIAGE_BENCH_NIGHT_RPM requests a minute
// (default 120,000: above what 16 workers at 20 ms can send, so the limit
// is there, with its headers, but does not decide the rate; 0 for none).
type nightBench struct {
	records, rounds int
	latency         time.Duration
	rpm             int
}

func nightBenchFromEnv(b *testing.B) nightBench {
	nb := nightBench{records: 100_000, rounds: 3, latency: 20 * time.Millisecond, rpm: 120_000}
	for _, v := range []struct {
		env string
		dst *int
	}{{"TRIAGE_BENCH_NIGHT", &nb.records}, {"TRIAGE_BENCH_NIGHT_ROUNDS", &nb.rounds}, {"TRIAGE_BENCH_NIGHT_RPM", &nb.rpm}} {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || (n == 0 && v.env != "TRIAGE_BENCH_NIGHT_RPM") {
				b.Fatalf("%s=%q: want a positive whole number", v.env, s)
			}
			*v.dst = n
		}
	}
	if s := os.Getenv("TRIAGE_BENCH_NIGHT_LATENCY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			b.Fatalf("TRIAGE_BENCH_NIGHT_LATENCY=%q: want a duration such as 20ms (0 for none)", s)
		}
		nb.latency = d
	}
	return nb
}

func (nb nightBench) scenario() fakeprovider.Scenario {
	sc := fakeprovider.Scenario{Latency: fakeprovider.Duration(nb.latency)}
	if nb.rpm > 0 {
		sc.RateLimit = &fakeprovider.RateLimit{RequestsPerMinute: nb.rpm}
	}
	return sc
}

// nightRun is what one side of one round measured.
type nightRun struct {
	rate    float64 // jobs/s, from the worker's start to the last completion
	cpuUS   float64 // process CPU (user+system) per job, µs
	rssMB   float64 // the process's peak RSS during the run
	dbPer1k float64 // bytes the schema's tables use, per 1,000 records
}

// BenchmarkNight is the night benchmark: TRIAGE_BENCH_NIGHT records
// (default 100,000) through a worker process as `triage work` runs it (the
// key's derived fetch_cooldown, River's poll interval, the real backoffs,
// the retention service; the records enqueued with the streaming enqueue)
// against the fake provider with a fixed latency and rate limit, and the
// same jobs through a bare River worker that makes the same HTTP call,
// stores the answer in one row and completes the job in one transaction,
// at the same concurrency and fetch cooldown. Each round runs both sides,
// the order alternating; it reports, per side, the medians of jobs/s, CPU
// per job, peak RSS and database bytes per 1,000 records, and each ratio
// (triage / bare) as its median with the lowest and highest round.
//
// The fake provider is served by the measured process, so CPU and RSS
// include its side of every call, on both sides alike. Peak RSS is the
// process's (VmHWM, reset before each side). Database bytes are every
// table of the side's schema with indexes and TOAST (triage: ledger and
// River tables; bare: River's and its answer table), after the run less
// the empty schema's; the records' input is in the enqueue's rows on both
// sides.
func BenchmarkNight(b *testing.B) {
	nb := nightBenchFromEnv(b)
	for b.Loop() {
		var tri, bare []nightRun
		for r := range nb.rounds {
			if r%2 == 0 {
				bare = append(bare, runNightBare(b, nb))
				tri = append(tri, runNightTriage(b, nb))
			} else {
				tri = append(tri, runNightTriage(b, nb))
				bare = append(bare, runNightBare(b, nb))
			}
		}
		for _, m := range []struct {
			name string
			of   func(nightRun) float64
		}{
			{"jobs/s", func(r nightRun) float64 { return r.rate }},
			{"cpu_us/job", func(r nightRun) float64 { return r.cpuUS }},
			{"peak_rss_MB", func(r nightRun) float64 { return r.rssMB }},
			{"db_KB/1k_records", func(r nightRun) float64 { return r.dbPer1k / 1024 }},
		} {
			var t, bb, ratio []float64
			for i := range tri {
				t, bb = append(t, m.of(tri[i])), append(bb, m.of(bare[i]))
				ratio = append(ratio, m.of(tri[i])/m.of(bare[i]))
			}
			b.ReportMetric(median(t), "triage_"+m.name)
			b.ReportMetric(median(bb), "bare_"+m.name)
			name := map[string]string{"jobs/s": "throughput", "cpu_us/job": "cpu", "peak_rss_MB": "rss", "db_KB/1k_records": "db"}[m.name]
			b.ReportMetric(median(ratio), name+"_ratio")
			b.ReportMetric(minOf(ratio), name+"_ratio_min")
			b.ReportMetric(maxOf(ratio), name+"_ratio_max")
		}
	}
}

func minOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = max(m, x)
	}
	return m
}

// nightWait waits for n completion events: at least 5 minutes, and a
// second for every 50 jobs beyond.
func nightWait(b *testing.B, events <-chan *river.Event, n int) {
	b.Helper()
	limit := 5*time.Minute + time.Duration(n/50)*time.Second
	timeout := time.After(limit)
	for seen := 0; seen < n; {
		select {
		case <-events:
			seen++
		case <-timeout:
			b.Fatalf("only %d of %d jobs completed in %s", seen, n, limit)
		}
	}
}

// measureNight runs start, waits for n completions on events, and returns
// the rate, CPU per job and peak RSS of that span.
func measureNight(b *testing.B, n int, events <-chan *river.Event, start func()) nightRun {
	b.Helper()
	debug.FreeOSMemory()
	if !resetPeakRSS() {
		b.Log("cannot reset the peak RSS: peak_rss_MB includes what ran before")
	}
	t0, cpu0 := time.Now(), cpuTime()
	start()
	nightWait(b, events, n)
	elapsed, used := time.Since(t0), cpuTime()-cpu0
	return nightRun{rate: float64(n) / elapsed.Seconds(), cpuUS: float64(used.Microseconds()) / float64(n), rssMB: peakRSS() / (1 << 20)}
}

// schemaBytes is the disk every table of the current schema uses, with
// indexes and TOAST.
func schemaBytes(b *testing.B, pool *pgxpool.Pool) float64 {
	b.Helper()
	var n int64
	require.NoError(b, pool.QueryRow(context.Background(), `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c WHERE c.relkind = 'r'
		  AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())`).Scan(&n))
	return float64(n)
}

func runNightTriage(b *testing.B, nb nightBench) nightRun {
	b.Helper()
	tb := setup(b, nb.scenario(), tweaks{concurrency: benchWorkers})
	// As `triage work` builds its options: no test-sized backoffs, ticks
	// or fetch settings.
	tb.opts = worker.Options{Config: tb.cfg, Schema: tb.db.Schema, Getenv: tb.opts.Getenv, Logger: slog.New(slog.DiscardHandler)}
	empty := schemaBytes(b, tb.db.Pool)
	got, err := enqueue.JSONL(context.Background(), tb.db.Pool, tb.db.Schema, tb.cfg,
		enqueue.Params{Pipeline: workertest.Pipeline, Batch: "night", File: "night.jsonl"}, &jsonlGen{n: nb.records})
	require.NoError(b, err)
	require.Equal(b, nb.records, got)
	rt := tb.newRuntime(b)
	done, cancel := rt.River().Subscribe(river.EventKindJobCompleted)
	defer cancel()
	run := measureNight(b, nb.records, done, func() { tb.run(b, rt) })
	st := tb.status(b, "night")
	require.Equal(b, nb.records, st.Completed, fmt.Sprintf("%+v", st))
	run.dbPer1k = (schemaBytes(b, tb.db.Pool) - empty) / float64(nb.records) * 1000
	return run
}

// nightBareArgs is the bare worker's job: the record, as the enqueue
// stores it in triage's job.
type nightBareArgs struct {
	RecordID string          `json:"record_id"`
	Record   json.RawMessage `json:"record"`
}

func (nightBareArgs) Kind() string { return "bench_night_bare" }

// nightBareWorker makes the call triage makes (the same pipeline's system
// prompt and record, the same model) and stores the answer's text with
// its tokens in one row, completing the job in the same transaction. A
// failed call is River's to retry.
type nightBareWorker struct {
	river.WorkerDefaults[nightBareArgs]
	pool    *pgxpool.Pool
	client  *http.Client
	url     string
	system  string
	model   string
	authKey string
}

type nightBareAnswer struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func (w *nightBareWorker) Work(ctx context.Context, job *river.Job[nightBareArgs]) error {
	body, err := json.Marshal(map[string]any{
		"model": w.model,
		"messages": []map[string]string{
			{"role": "system", "content": w.system},
			{"role": "user", "content": "Record: " + string(job.Args.Record)},
		},
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+w.authKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	var ans nightBareAnswer
	if err := json.Unmarshal(raw, &ans); err != nil || len(ans.Choices) == 0 {
		return fmt.Errorf("answer: %v", err)
	}
	t, err := w.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer t.Rollback(ctx) //nolint:errcheck
	if _, err := t.Exec(ctx, "INSERT INTO bench_night_answer (job_id, record_id, output, input_tokens, output_tokens) VALUES ($1, $2, $3, $4, $5)",
		job.ID, job.Args.RecordID, ans.Choices[0].Message.Content, ans.Usage.PromptTokens, ans.Usage.CompletionTokens); err != nil {
		return err
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, t, job); err != nil {
		return err
	}
	return t.Commit(ctx)
}

func runNightBare(b *testing.B, nb nightBench) nightRun {
	b.Helper()
	ctx := context.Background()
	db := dbtest.New(b, dbtest.Options{MaxConns: 60})
	_, baseURL := workertest.Provider(b, func() fakeprovider.Scenario {
		sc := nb.scenario()
		sc.APIKey = workertest.APIKey
		return sc
	}())
	cfg, err := config.Parse([]byte(workertest.Config(workertest.ConfigOptions{BaseURL: baseURL, Concurrency: benchWorkers})), "bench.toml")
	require.NoError(b, err)
	pl, err := cfg.Pipeline(workertest.Pipeline)
	require.NoError(b, err)
	_, err = db.Pool.Exec(ctx, `CREATE TABLE bench_night_answer (job_id bigint PRIMARY KEY, record_id text NOT NULL,
		output text NOT NULL, input_tokens int NOT NULL, output_tokens int NOT NULL, at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(b, err)
	empty := schemaBytes(b, db.Pool)
	pool, err := pgxpool.New(ctx, db.URL)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	workers := river.NewWorkers()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = benchWorkers
	river.AddWorker(workers, &nightBareWorker{pool: pool, client: &http.Client{Transport: transport, Timeout: time.Minute},
		url: baseURL + "/chat/completions", system: pl.System, model: pl.Model, authKey: workertest.APIKey})
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema: db.Schema, Workers: workers,
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: benchWorkers, FetchCooldown: config.FetchCooldownFor(benchWorkers)}},
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(b, err)
	params := make([]river.InsertManyParams, nb.records)
	for i := range params {
		params[i] = river.InsertManyParams{Args: nightBareArgs{RecordID: fmt.Sprintf("r%07d", i+1), Record: json.RawMessage(benchRecord(i + 1))}}
	}
	_, err = rc.InsertManyFast(ctx, params)
	require.NoError(b, err)
	done, cancel := rc.Subscribe(river.EventKindJobCompleted)
	defer cancel()
	run := measureNight(b, nb.records, done, func() { require.NoError(b, rc.Start(ctx)) })
	require.NoError(b, rc.Stop(ctx))
	run.dbPer1k = (schemaBytes(b, db.Pool) - empty) / float64(nb.records) * 1000
	return run
}
