package nightsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/jobs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/nightsim"
	"github.com/triage-dev/triage/worker/operator"
	"github.com/triage-dev/triage/worker/submitter"
	"github.com/triage-dev/triage/worker/workertest"
)

// Names of the night's world.
const (
	batchID   = "night"
	pipeline  = "enrich"
	apiKeyEnv = "NIGHTSIM_API_KEY"
	// probeInterval of both keys; the breaker invariant counts probes by it.
	probeInterval = 300 * time.Millisecond
	// contextTokens is the fake's context window when the night has long
	// records.
	contextTokens = 400
)

// batchTuning makes the submitters' rounds and polls quick.
var batchTuning = submitter.Tuning{Tick: 20 * time.Millisecond, Gather: 200 * time.Millisecond,
	PollMin: 20 * time.Millisecond, PollMax: 100 * time.Millisecond, Lease: 2 * time.Second}

// childEnv carries a child worker process's settings (SIGKILL nights).
const childEnv = "NIGHTSIM_CHILD"

type childSpec struct {
	DatabaseURL string           `json:"database_url"`
	ConfigTOML  string           `json:"config_toml"`
	APIKey      string           `json:"api_key"`
	LogFile     string           `json:"log_file"`
	MaxAge      time.Duration    `json:"max_age"`
	Batch       submitter.Tuning `json:"batch"`
	ID          string           `json:"id"`
}

// TestMain lets the test binary double as a worker process that a night
// kills with SIGKILL: nothing runs after it, as no in-process stop can do.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(childProcess(spec))
	}
	os.Exit(m.Run())
}

func childProcess(specJSON string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg, err := config.Parse([]byte(spec.ConfigTOML), "night.toml")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	logf, err := os.OpenFile(spec.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, spec.DatabaseURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := workerOptions(cfg, "", spec.APIKey, slog.New(slog.NewJSONHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	opts.Pool, opts.ID, opts.MaxAge, opts.Batch = pool, spec.ID, spec.MaxAge, spec.Batch
	rt, err := worker.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := rt.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = rt.Stop(sctx)
	return 0
}

// workerOptions are the options of every process of a night: short
// backoffs and ticks, logs at debug level (the secret check reads them).
func workerOptions(cfg *config.Config, schema, apiKey string, log *slog.Logger) worker.Options {
	o := workertest.WorkerOptions(cfg, schema)
	o.Getenv = func(k string) string {
		if k == apiKeyEnv {
			return apiKey
		}
		return ""
	}
	o.Logger = log
	o.RescueAfter = 3 * time.Second
	o.JobMargin = time.Second
	o.BudgetRecheck = 200 * time.Millisecond
	o.KeyPauseAfter = 500 * time.Millisecond
	return o
}

// configTOML is the night's triage.toml with the pipeline in mode.
func configTOML(n nightsim.Night, mode, primaryURL, fbURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `
[[keys]]
name = "main"
vendor = %q
base_url = %q
api_key_env = %q
concurrency = %d
timeout = "1500ms"
probe_interval = %q

[[models]]
name = "fake-model"
key = "main"
input_usd_per_mtok = 0.15
output_usd_per_mtok = 0.60
`, n.Vendor, primaryURL, apiKeyEnv, n.Concurrency, probeInterval)
	if n.Fallback != "" {
		fmt.Fprintf(&b, `
[[keys]]
name = "fb"
vendor = %q
base_url = %q
api_key_env = %q
concurrency = %d
timeout = "1500ms"
probe_interval = %q

[[models]]
name = "fb-model"
key = "fb"
json_mode = true
input_usd_per_mtok = 0.30
output_usd_per_mtok = 1.20
`, n.Fallback, fbURL, apiKeyEnv, n.Concurrency, probeInterval)
	}
	fmt.Fprintf(&b, `
[[pipelines]]
name = %q
model = "fake-model"
system = %q
prompt = "Record: {{json .}}"
output = %q
max_attempts = 4
max_tokens = 200
mode = %q
on_overflow = %q
`, pipeline, system(n.Output), n.Output, mode, n.Overflow)
	if n.Cache {
		b.WriteString("cache = true\n")
	}
	if n.Stream {
		b.WriteString("stream = true\nstream_idle_timeout = \"500ms\"\nstream_max = \"3s\"\n")
	}
	if n.AcceptPartial > 0 {
		fmt.Fprintf(&b, "accept_partial_min_chars = %d\n", n.AcceptPartial)
	}
	if n.BudgetUSD > 0 {
		fmt.Fprintf(&b, "budget_usd = %g\n", n.BudgetUSD)
	}
	if n.Fallback != "" {
		b.WriteString("fallback = [\"fb-model\"]\nfallback_grace = \"300ms\"\n")
	}
	if mode == "auto" {
		b.WriteString("deadline = \"20s\"\nauto_margin = \"10s\"\n")
	}
	return b.String()
}

// system is the pipeline's system prompt: the fake answers JSON when it
// is asked for.
func system(output string) string {
	if output == "text" {
		return "You describe records in one sentence."
	}
	return "You add fields to records. Answer with one JSON object."
}

// echo wraps a provider that echoes the caller's API key in its error
// answers (a header and the message), as misconfigured gateways do: every
// byte of it must be stopped at the redaction boundary.
type echo struct{ h http.Handler }

func (e echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("x-api-key")
	if a := r.Header.Get("Authorization"); key == "" && strings.HasPrefix(a, "Bearer ") {
		key = strings.TrimPrefix(a, "Bearer ")
	}
	e.h.ServeHTTP(&echoWriter{ResponseWriter: w, key: key}, r)
}

type echoWriter struct {
	http.ResponseWriter
	key   string
	error bool
}

func (w *echoWriter) WriteHeader(code int) {
	if code >= 400 {
		w.error = true
		w.Header().Set("X-Debug-Key", w.key)
		w.Header().Del("Content-Length")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *echoWriter) Write(p []byte) (int, error) {
	if w.error {
		q := bytes.Replace(p, []byte(`"message":"`), []byte(`"message":"(key `+w.key+`) `), 1)
		if _, err := w.ResponseWriter.Write(q); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (w *echoWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// setupMu serialises the nights' schema creation.
var setupMu sync.Mutex

// proc is one worker process of the fleet.
type proc struct {
	i    int
	gen  int
	mode string
	rt   *worker.Runtime
	pool *pgxpool.Pool
	cmd  *exec.Cmd
	up   bool
}

// world is one night being run.
type world struct {
	t       *testing.T
	n       nightsim.Night
	db      *dbtest.DB
	appName string
	canary  string
	primary *fakeprovider.Server
	fb      *fakeprovider.Server
	pURL    string
	fbURL   string
	logs    *workertest.Buffer
	logDir  string
	cfgs    map[string]*config.Config
	tomls   map[string]string
	procs   []*proc
	alerter *keys.Alerter
	start   time.Time
	notes   []string // what happened, for the failure report
	notesMu sync.Mutex
	rng     *rand.Rand

	// The primary's weather, composed into its scenario.
	outage   string
	rate     *fakeprovider.RateLimit
	limited  bool
	flaky    *fakeprovider.RandomFault
	fbDown   bool
	lowSince time.Time     // when the balance was last set low
	lowFor   time.Duration // summed time with a limited balance
	resumes  int           // operator resumes and restarts: each may let a round of calls out
	// breakers: the primary's breakers as sampled all night (breakers_test.go).
	breakers []breakerSample
}

func (w *world) note(format string, args ...any) {
	w.notesMu.Lock()
	defer w.notesMu.Unlock()
	w.notes = append(w.notes, fmt.Sprintf("%7.2fs ", time.Since(w.start).Seconds())+fmt.Sprintf(format, args...))
}

func newWorld(t *testing.T, n nightsim.Night) *world {
	w := &world{t: t, n: n, logs: &workertest.Buffer{}, logDir: t.TempDir(), cfgs: map[string]*config.Config{}, tomls: map[string]string{},
		rng: rand.New(rand.NewPCG(uint64(n.Seed), 7))}
	// Migrations take one advisory lock for the whole cluster, within a
	// minute: nights started together create their schemas one at a time
	// here, so that none waits its minute out on the others' (a soak of
	// twelve nights on a busy machine did).
	// The unlock is deferred: dbtest.New fails the night with t.Fatal
	// (a migration cut by its deadline on a loaded machine), and a lock
	// left held stopped every later night of the soak (seed 60405).
	func() {
		setupMu.Lock()
		defer setupMu.Unlock()
		w.db = dbtest.New(t, dbtest.Options{MaxConns: 4})
	}()
	w.appName = "nightsim-" + w.db.Schema
	w.canary = fmt.Sprintf("sk-nightsim-canary-%d-%x", n.Seed, w.rng.Uint64())
	serve := func(sc fakeprovider.Scenario) (*fakeprovider.Server, string) {
		fake := fakeprovider.New(sc)
		var h http.Handler = fake
		if n.EchoKey {
			h = echo{fake}
		}
		srv := httptest.NewServer(h)
		t.Cleanup(func() { fake.Close(); srv.Close() })
		return fake, srv.URL + "/v1"
	}
	w.primary, w.pURL = serve(w.scenario())
	if n.Fallback != "" {
		w.fb, w.fbURL = serve(w.fbScenario())
	}
	modes := []string{n.Mode}
	for _, e := range n.Events {
		if e.Kind == nightsim.Start {
			modes = append(modes, e.Mode)
		}
	}
	for _, mode := range modes {
		text := configTOML(n, mode, w.pURL, w.fbURL)
		cfg, err := config.Parse([]byte(text), "night.toml")
		require.NoError(t, err, "the night's configuration:\n%s", text)
		w.cfgs[mode], w.tomls[mode] = cfg, text
	}
	alerter, err := keys.NewAlerter(keys.AlerterConfig{Logger: w.logger(), Pool: w.db.Pool})
	require.NoError(t, err)
	w.alerter = alerter
	w.procs = make([]*proc, n.Procs)
	for i := range w.procs {
		w.procs[i] = &proc{i: i, mode: n.Mode}
	}
	return w
}

func (w *world) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// scenario is the primary's scenario for the weather now.
func (w *world) scenario() fakeprovider.Scenario {
	sc := fakeprovider.Scenario{Name: "night", Seed: w.n.Seed, APIKey: w.canary, NoReplay: true, Latency: fakeprovider.Duration(w.n.Latency),
		Poison: fakeprovider.Poison{InvalidMarker: "POISON"},
		Batch:  fakeprovider.BatchScenario{Latency: fakeprovider.Duration(w.n.BatchLatency)}}
	if w.n.LongEvery > 0 {
		sc.Poison.ContextTokens = contextTokens
	}
	if w.n.ExpireShare > 0 {
		sc.Batch.ExpireShare = w.n.ExpireShare
		sc.Batch.ExpireAfter = fakeprovider.Duration(w.n.BatchLatency / 2)
	}
	if w.outage != "" {
		sc.Outages = []fakeprovider.Outage{{For: fakeprovider.Duration(24 * time.Hour), Action: fakeprovider.Action(w.outage)}}
	}
	sc.RateLimit = w.rate
	if w.flaky != nil {
		sc.Random = []fakeprovider.RandomFault{*w.flaky}
	}
	return sc
}

func (w *world) fbScenario() fakeprovider.Scenario {
	sc := fakeprovider.Scenario{Name: "fallback", Seed: w.n.Seed + 1, APIKey: w.canary, NoReplay: true, Latency: fakeprovider.Duration(w.n.Latency),
		Price:  fakeprovider.Price{InputUSDPerMTok: 0.30, OutputUSDPerMTok: 1.20},
		Poison: fakeprovider.Poison{InvalidMarker: "POISON"},
		Batch:  fakeprovider.BatchScenario{Latency: fakeprovider.Duration(w.n.BatchLatency)}}
	if w.n.LongEvery > 0 {
		sc.Poison.ContextTokens = contextTokens
	}
	if w.fbDown {
		sc.Outages = []fakeprovider.Outage{{For: fakeprovider.Duration(24 * time.Hour)}}
	}
	return sc
}

// setWeather installs the primary's scenario, keeping what is left of a
// limited balance.
func (w *world) setWeather() {
	sc := w.scenario()
	if w.limited {
		left := 0.0
		if b := w.primary.Stats().BalanceUSD; b != nil {
			left = *b
		}
		sc.Balance = &fakeprovider.Balance{USD: left}
	}
	require.NoError(w.t, w.primary.SetScenario(sc))
}

// startProc starts process p (again), in-process or as the child.
func (w *world) startProc(p *proc) {
	t := w.t
	p.gen++
	id := fmt.Sprintf("p%d-%d", p.i, p.gen)
	cfg := w.cfgs[p.mode]
	if p.i == w.n.Child {
		spec, err := json.Marshal(childSpec{DatabaseURL: w.db.URL + "&application_name=" + w.appName, ConfigTOML: w.tomls[p.mode],
			APIKey: w.canary, LogFile: filepath.Join(w.logDir, id+".log"), MaxAge: w.n.MaxAge, Batch: batchTuning, ID: id})
		require.NoError(t, err)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		p.cmd, p.up = cmd, true
		w.note("start %s (child pid %d, mode %s)", id, cmd.Process.Pid, p.mode)
		return
	}
	pc, err := pgxpool.ParseConfig(w.db.URL)
	require.NoError(t, err)
	pc.MaxConns = 10
	pc.ConnConfig.RuntimeParams["application_name"] = w.appName
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	opts := workerOptions(cfg, w.db.Schema, w.canary, w.logger().With("proc", id))
	opts.Pool, opts.ID, opts.MaxAge, opts.Batch = pool, id, w.n.MaxAge, batchTuning
	if p.i == 0 && w.n.Skew != 0 {
		opts.HostClock = skewed(w.n.Skew)
	}
	rt, err := worker.New(opts)
	require.NoError(t, err)
	require.NoError(t, rt.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Stop(ctx)
	})
	p.rt, p.pool, p.up = rt, pool, true
	w.note("start %s (mode %s)", id, p.mode)
}

// stopProc stops p: gracefully (SIGTERM, Stop with time to finish) or
// killed (SIGKILL; in-process, a Stop whose context is already over).
func (w *world) stopProc(p *proc, kill bool) {
	if !p.up {
		return
	}
	p.up = false
	w.note("%s p%d-%d", map[bool]string{true: "kill", false: "stop"}[kill], p.i, p.gen)
	if p.cmd != nil {
		sig := syscall.SIGTERM
		if kill {
			sig = syscall.SIGKILL
		}
		_ = p.cmd.Process.Signal(sig)
		_ = p.cmd.Wait()
		p.cmd = nil
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if kill {
		cancel()
	}
	defer cancel()
	_ = p.rt.Stop(ctx)
	p.pool.Close()
	p.rt, p.pool = nil, nil
}

type skewed time.Duration

func (s skewed) Now() time.Time { return time.Now().Add(time.Duration(s)) }

// dbBlip cuts every connection of the fleet, as a database restart does.
func (w *world) dbBlip() {
	var n int
	err := w.db.Pool.QueryRow(context.Background(),
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, w.appName).Scan(&n)
	require.NoError(w.t, err)
	w.note("db blip: %d connections cut", n)
}

// operate is the operator's action at a random moment.
func (w *world) operate(e nightsim.Event) {
	ctx := context.Background()
	pool := w.db.Pool
	cfg := w.cfgs[w.n.Mode]
	switch e.Op {
	case nightsim.OpResume:
		res, err := operator.Resume(ctx, pool, cfg, "main", operator.ResumeOptions{Alerter: w.alerter, By: "nightsim"})
		require.NoError(w.t, err)
		if res.WasHeld {
			w.resumes++
		}
		w.note("operator: keys resume main (was %s, woke %d)", res.Was(), res.Woken)
	case nightsim.OpRaiseBudget:
		b, err := ledger.GetBatch(ctx, pool, batchID)
		require.NoError(w.t, err)
		usd := e.USD
		if b.BudgetUSD != nil {
			usd += *b.BudgetUSD
		}
		require.NoError(w.t, ledger.SetBatchBudget(ctx, pool, batchID, &usd))
		_, err = jobs.WakeBatch(ctx, pool, w.db.Schema, batchID)
		require.NoError(w.t, err)
		w.note("operator: batch budget %s $%.4f", batchID, usd)
	case nightsim.OpCancelBatch:
		reqs, err := operator.CancelProviderBatches(ctx, pool, batchID)
		require.NoError(w.t, err)
		w.note("operator: batch cancel %s (%d provider batches)", batchID, len(reqs))
	case nightsim.OpRequeue:
		res, err := operator.Requeue(ctx, pool, cfg, operator.Selection{Batch: batchID}, operator.RequeueOptions{Alerter: w.alerter})
		var live *operator.LiveJobError
		var input *operator.InputError
		switch {
		case errors.As(err, &live), errors.As(err, &input):
			w.note("operator: dlq requeue refused: %v", err)
		default:
			require.NoError(w.t, err)
			w.note("operator: dlq requeue %d", res.Requeued)
		}
	case nightsim.OpCancelJobs:
		rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: w.db.Schema})
		require.NoError(w.t, err)
		rows, err := pool.Query(ctx, `SELECT id FROM river_job WHERE kind = 'triage_call'
			AND state NOT IN ('completed', 'cancelled', 'discarded') ORDER BY id`)
		require.NoError(w.t, err)
		var ids []int64
		for rows.Next() {
			var id int64
			require.NoError(w.t, rows.Scan(&id))
			ids = append(ids, id)
		}
		require.NoError(w.t, rows.Err())
		var cancelled []int64
		for range min(3, len(ids)) {
			id := ids[w.rng.IntN(len(ids))]
			if _, err := rc.JobCancel(ctx, id); err == nil {
				cancelled = append(cancelled, id)
			}
		}
		w.note("operator: cancel River jobs %v", cancelled)
	}
}

// apply runs one event of the schedule.
func (w *world) apply(e nightsim.Event) {
	switch e.Kind {
	case nightsim.OutageOn:
		w.outage = e.Action
	case nightsim.OutageOff:
		w.outage = ""
	case nightsim.RateOn:
		w.rate = &fakeprovider.RateLimit{RequestsPerMinute: 300, BurstRequests: 3, NoHeaders: e.Flag}
	case nightsim.RateOff:
		w.rate = nil
	case nightsim.BalanceLow:
		if !w.limited {
			w.lowSince = time.Now()
		}
		w.limited = true
		sc := w.scenario()
		sc.Balance = &fakeprovider.Balance{USD: e.USD}
		require.NoError(w.t, w.primary.SetScenario(sc))
		w.note("%s", e)
		return
	case nightsim.TopUp:
		w.primary.TopUp(e.USD)
		w.note("%s", e)
		return
	case nightsim.FlakyOn:
		w.flaky = &fakeprovider.RandomFault{P: e.P, Action: fakeprovider.Action(e.Action)}
	case nightsim.FlakyOff:
		w.flaky = nil
	case nightsim.FallbackDown, nightsim.FallbackUp:
		w.fbDown = e.Kind == nightsim.FallbackDown
		if w.fb != nil {
			require.NoError(w.t, w.fb.SetScenario(w.fbScenario()))
		}
		w.note("%s", e)
		return
	case nightsim.Stop, nightsim.Kill:
		w.stopProc(w.procs[e.Proc], e.Kind == nightsim.Kill)
		return
	case nightsim.Start:
		p := w.procs[e.Proc]
		if !p.up {
			p.mode = e.Mode
			w.startProc(p)
			w.resumes++
		}
		return
	case nightsim.DBBlip:
		w.dbBlip()
		return
	case nightsim.Operate:
		w.operate(e)
		return
	}
	w.setWeather()
	w.note("%s", e)
}

// endFaults clears the weather: no outage, rate limit or flaky calls, the
// fallback up, the balance unlimited (unless the night leaves it spent),
// and every process running.
func (w *world) endFaults() {
	w.outage, w.rate, w.flaky, w.fbDown = "", nil, nil, false
	if w.fb != nil {
		require.NoError(w.t, w.fb.SetScenario(w.fbScenario()))
	}
	if w.limited && !w.n.NoTopUp {
		w.lowFor += time.Since(w.lowSince)
		w.limited = false
	}
	w.setWeather()
	for _, p := range w.procs {
		if !p.up {
			w.startProc(p)
			w.resumes++
		}
	}
	w.note("faults end")
}

// enqueue writes the night's batch: poisoned and long records among the
// ordinary ones, and every sixth record a copy of an earlier one (its own
// id, the same data), for the response cache to answer.
func (w *world) enqueue() {
	require.NoError(w.t, enqueue.Batch(context.Background(), w.db.Pool, w.db.Schema, w.cfgs[w.n.Mode],
		enqueue.Params{Pipeline: pipeline, Batch: batchID, Records: w.records()}))
}

func (w *world) records() []ledger.Record {
	data := func(i int) string {
		id := fmt.Sprintf("r%03d", i+1)
		switch {
		case w.n.PoisonEvery > 0 && i%w.n.PoisonEvery == w.n.PoisonEvery-1:
			return fmt.Sprintf(`{"id":%q,"name":"name %d","note":"POISON"}`, id, i+1)
		case w.n.LongEvery > 0 && i%w.n.LongEvery == w.n.LongEvery-1:
			return fmt.Sprintf(`{"id":%q,"name":"name %d","text":%q}`, id, i+1, strings.Repeat("lorem ipsum ", 250))
		}
		return fmt.Sprintf(`{"id":%q,"name":"name %d"}`, id, i+1)
	}
	out := make([]ledger.Record, w.n.Records)
	for i := range out {
		d := data(i)
		if i%6 == 5 {
			d = data(i / 3) // answered (and cached) well before
		}
		out[i] = ledger.Record{ID: fmt.Sprintf("r%03d", i+1), Line: i + 1, Data: json.RawMessage(d)}
	}
	return out
}

// answerID is the id a record's answer names: its data's, which a copy
// shares with the record it copies.
func answerID(rec ledger.Record) string {
	var d struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(rec.Data, &d)
	return d.ID
}

// run plays the night: enqueue, start the fleet, the schedule, the end of
// the faults, and waits until the batch settles (false: it did not within
// the bound).
func (w *world) run(settle time.Duration) bool {
	w.enqueue()
	w.start = time.Now()
	wt := w.watchBreakers()
	defer func() { w.breakers = wt.close() }()
	for _, p := range w.procs {
		w.startProc(p)
	}
	for _, e := range w.n.Events {
		if d := time.Until(w.start.Add(e.At)); d > 0 {
			<-time.After(d)
		}
		w.apply(e)
	}
	if d := time.Until(w.start.Add(w.n.Length)); d > 0 {
		<-time.After(d)
	}
	w.endFaults()
	// The bound is counted at the machine's pace (pace_test.go): a second
	// at a slowdown of s counts 1/s.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	began, last := time.Now(), time.Now()
	var counted time.Duration
	worst := 1.0
	paced := func() string {
		_, med, usual := wt.pace(time.Now(), false)
		return fmt.Sprintf("%s of wall time counted as %s; slowdown up to ×%.1f, the last breaker reads' median %s, this run's usual %s",
			time.Since(began).Round(10*time.Millisecond), counted.Round(10*time.Millisecond), worst, med.Round(10*time.Microsecond), usual.Round(10*time.Microsecond))
	}
	for {
		settled, err := w.settled()
		require.NoError(w.t, err)
		if settled {
			w.note("settled")
			if worst > 1 {
				w.note("  (settling: %s)", paced())
			}
			break
		}
		now := time.Now()
		s, _, _ := wt.pace(now, false)
		worst = max(worst, s)
		counted += time.Duration(float64(now.Sub(last)) / s)
		last = now
		if counted > settle {
			w.note("did not settle within %s at the machine's pace (%s)", settle, paced())
			return false
		}
		<-tick.C
	}
	if w.limited {
		w.lowFor += time.Since(w.lowSince)
	}
	// Stop the fleet so the counts below stand still.
	for _, p := range w.procs {
		w.stopProc(p, false)
	}
	return true
}

// settled: every record completed or dead-lettered, and no job of the
// batch left to run.
func (w *world) settled() (bool, error) {
	st, err := ledger.BatchStatus(context.Background(), w.db.Pool, batchID)
	if err != nil {
		return false, err
	}
	if st.Completed+st.DeadLettered != st.Total {
		return false, nil
	}
	var live int
	err = w.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job
		WHERE kind = 'triage_call' AND state NOT IN ('completed', 'cancelled', 'discarded')`).Scan(&live)
	return live == 0, err
}

// stuck describes the records that did not settle.
func (w *world) stuck() []string {
	rows, err := w.db.Pool.Query(context.Background(), `SELECT j.args->>'record_id', j.state::text, j.attempt,
		coalesce(j.scheduled_at::text, ''), coalesce((j.errors[array_length(j.errors, 1)])->>'error', '')
		FROM river_job j WHERE kind = 'triage_call' AND state NOT IN ('completed', 'cancelled', 'discarded') ORDER BY 1`)
	require.NoError(w.t, err)
	defer rows.Close()
	out := []string{"the batch did not settle; jobs left:"}
	for rows.Next() {
		var rec, state, sched, last string
		var att int
		require.NoError(w.t, rows.Scan(&rec, &state, &att, &sched, &last))
		out = append(out, fmt.Sprintf("record %s: job %s, attempt %d, scheduled %s, last error %q", rec, state, att, sched, last))
	}
	require.NoError(w.t, rows.Err())
	st, err := ledger.BatchStatus(context.Background(), w.db.Pool, batchID)
	require.NoError(w.t, err)
	out = append(out, fmt.Sprintf("status: %d completed, %d dead-lettered of %d; state %s", st.Completed, st.DeadLettered, st.Total, st.State))
	return append(out, w.diagnose()...)
}

// diagnose says what the ledger and the key state hold, for a failing
// night's report.
func (w *world) diagnose() []string {
	ctx := context.Background()
	var out []string
	q := func(label, sql string) {
		rows, err := w.db.Pool.Query(ctx, sql)
		require.NoError(w.t, err)
		defer rows.Close()
		var parts []string
		for rows.Next() {
			var s string
			require.NoError(w.t, rows.Scan(&s))
			parts = append(parts, s)
		}
		require.NoError(w.t, rows.Err())
		out = append(out, label+": "+strings.Join(parts, "; "))
	}
	q("dead letters", `SELECT class || '/' || reason || ' ×' || count(*) FROM triage_dead_letter WHERE requeued_at IS NULL GROUP BY class, reason ORDER BY 1`)
	q("attempts", `SELECT status || coalesce('/' || class, '') || ' ×' || count(*) FROM triage_attempt GROUP BY status, class ORDER BY 1`)
	q("River jobs", `SELECT state::text || ' ×' || count(*) FROM river_job GROUP BY state ORDER BY 1`)
	q("provider batches", `SELECT s || ' ×' || count(*) FROM (SELECT state || coalesce('/' || vendor_status, '') AS s FROM triage_provider_batch) x GROUP BY s ORDER BY 1`)
	q("lines", `SELECT s || ' ×' || count(*) FROM (SELECT state || CASE WHEN provider_batch IS NULL THEN '' ELSE ' in a provider batch' END AS s
		FROM triage_provider_batch_line) x GROUP BY s ORDER BY 1`)
	q("lines of unsettled jobs", `SELECT s || ' ×' || count(*) FROM (SELECT l.state || coalesce(' in ' || b.state, '') || ' (job ' || j.state::text || ')' AS s
		FROM triage_provider_batch_line l JOIN river_job j ON j.id = l.job_id LEFT JOIN triage_provider_batch b ON b.id = l.provider_batch
		WHERE j.state NOT IN ('completed', 'cancelled', 'discarded')) x GROUP BY s ORDER BY 1`)
	q("queues", `SELECT name || coalesce(' paused ' || paused_at::text, '') FROM river_queue ORDER BY 1`)
	for _, k := range []string{"main", "fb"} {
		st, err := keys.DefaultStore(w.db.Pool).KeyStatus(ctx, k)
		if err == nil {
			js, _ := json.Marshal(st)
			out = append(out, "key "+k+": "+string(js))
		}
	}
	ps := w.primary.Stats()
	out = append(out, fmt.Sprintf("primary: %d requests, %d billed ($%.6f), %d while exhausted, by action %v",
		ps.Requests, ps.BilledCalls, ps.BilledUSD, ps.RequestsWhileExhausted, ps.ByAction))
	return out
}
