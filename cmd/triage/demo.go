package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/console"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/keys"
)

func init() {
	register(command{
		name:    "demo",
		summary: "run a stormy sample batch against a built-in fake provider (no configuration needed)",
		run:     runDemo,
	})
}

// demoSample is the shipped sample: 300 company records to enrich, of which
// five carry an invalid parameter, three a policy violation and two are far
// over the model's context window.
//
//go:embed demo/sample.jsonl
var demoSample []byte

// The demo's key, its fake account and its timings: short enough that the
// whole storm passes in about a minute.
const (
	demoAPIKeyEnv = "TRIAGE_DEMO_API_KEY"
	demoAPIKey    = "sk-demo-not-a-real-key"
	// demoBalanceUSD runs out about halfway through the batch.
	demoBalanceUSD = 0.004
	demoTopUpUSD   = 1.0
	demoPipeline   = "enrich"
)

// demoConfig is the embedded configuration; %s is the fake provider's URL.
const demoConfig = `
[[keys]]
name = "main"
vendor = "openai"
base_url = %q
api_key_env = "` + demoAPIKeyEnv + `"
concurrency = 8
timeout = "3s"
probe_interval = "5s"
idempotent_replay = true   # the fake provider replays a repeated Idempotency-Key
retry_budget = 1.0
storm_probe_min = "1s"     # the storm breaker's probes: the demo's outage is short
storm_probe_max = "2s"

[[models]]
name = "gpt-4o-mini"
key = "main"
context_tokens = 16000
input_usd_per_mtok = 0.15
output_usd_per_mtok = 0.60

[[pipelines]]
name = "enrich"
model = "gpt-4o-mini"
system = "You add fields to records. Answer with one JSON object."
prompt = "Record: {{json .}}"
output = "json"
max_attempts = 6
`

func runDemo(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage demo", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	interval := fs.Duration("progress-interval", progressIntervalDefault, "how often a progress line is printed when stderr is not a terminal")
	var ui uiFlags
	fs.StringVar(&ui.addr, "ui-addr", console.AddrDefault, "serve the web window here during the run and, after it, until interrupted")
	ui.defineToken(fs)
	noUI := fs.Bool("no-ui", false, "no web window: exit as soon as the batch settles (for scripts)")
	setUsage(fs, e,
		"usage: triage demo [--ui-addr 127.0.0.1:8080 [--ui-token T]] [--no-ui]",
		"Runs a 300-record sample batch against a fake provider served on 127.0.0.1 with a storm",
		"scenario: poisoned records (rejected), rate limits (throttled), an outage (transient), cut",
		"streams and hangs (ambiguous), and a prepaid balance that runs out (exhausted) and is",
		"topped up by the demo once the breaker is open and a probe failed. Needs no triage.toml;",
		"the database is DATABASE_URL, else the private cluster in "+embeddedDir+".",
		"Then it prints the URL of the batch's dead-letter page and keeps serving it (and working",
		"requeued records) until Ctrl-C; --no-ui exits at once instead.",
		"Exit 0 when the batch settles (its dead letters are part of the show), 4 if interrupted.",
	)
	if code, ok := parseNoArgs(e, "demo", fs, args); !ok {
		return code
	}
	fail := func(err error) int { return failCmd(e, "demo", err) }
	if *interval < 0 {
		return fail(usageError{errors.New("--progress-interval must not be negative")})
	}
	var ln net.Listener
	if !*noUI {
		if err := ui.resolve(e); err != nil {
			return fail(err)
		}
		var err error
		if ln, err = listenDemoUI(e, fs, ui); err != nil {
			return fail(fmt.Errorf("--ui-addr: %w", err))
		}
		defer ln.Close() // no-op once the server owns it
	}

	sc, err := fakeprovider.LoadScenario("storm")
	if err != nil {
		return fail(err)
	}
	sc.APIKey = demoAPIKey
	sc.Balance = &fakeprovider.Balance{USD: demoBalanceUSD}
	fake := fakeprovider.New(sc)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	defer fake.Close() // first: releases hung requests so srv.Close does not wait on them
	cfg, err := config.Parse(fmt.Appendf(nil, demoConfig, srv.URL+"/v1"), "demo.toml")
	if err != nil {
		return fail(err)
	}
	recs, err := enqueue.ReadJSONL(bytes.NewReader(demoSample), "demo/sample.jsonl")
	if err != nil {
		return fail(err)
	}

	d, err := openDB(ctx, e, nil)
	if err != nil {
		return fail(err)
	}
	defer d.Close()
	id, err := enqueueDemo(ctx, d, cfg, recs)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(e.stderr, "triage demo: %d records as batch %s on %s\n", len(recs), id, d.where)
	var web *webUI
	if ln != nil {
		// INFO: a person's own actions on the page (a requeue) are alerts
		// logged at INFO, and the demo shows them.
		uiLog := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		if web, err = startUI(ctx, d, cfg, ln, ui.token, uiLog); err != nil {
			return fail(fmt.Errorf("--ui-addr: %w", err))
		}
		defer web.Close()
		fmt.Fprintf(e.stderr, "watch it: %s/batches/%s\n", web.base, id)
	}
	fmt.Fprintf(e.stderr, "fake provider on %s: storm scenario (rate limits, an outage, cut streams, hangs, poisoned records),\n", srv.URL)
	fmt.Fprintf(e.stderr, "prepaid balance $%.3f; the demo tops it up once the key's breaker is open and a probe has failed\n\n", demoBalanceUSD)

	getenv := func(k string) string {
		if k == demoAPIKeyEnv {
			return demoAPIKey
		}
		return e.getenv(k)
	}
	tu := &topUp{fake: fake}
	out, err := workBatch(ctx, e, batchRun{
		cfg: cfg, d: d, batch: id, key: "main", interval: *interval, dbWait: dbWaitDefault, getenv: getenv, watch: tu.watch,
		opts: worker.Options{
			BackoffBase:       250 * time.Millisecond,
			BackoffCap:        4 * time.Second,
			FetchCooldown:     20 * time.Millisecond,
			FetchPollInterval: 200 * time.Millisecond,
		},
	})
	if err != nil {
		return fail(err)
	}
	stats := fake.Stats()
	fmt.Fprintf(e.stdout, "the provider saw %d requests and billed %d calls ($%.6f); records billed twice: %d\n",
		stats.Requests, stats.BilledCalls, stats.BilledUSD, stats.DoubleBilledRecords)
	fmt.Fprintf(e.stdout, "\nlook next (no triage.toml needed%s):\n", demoDBNote(e))
	self := selfCommand(e)
	for _, c := range []string{
		"status " + id,
		"dlq list --batch " + id,
		"ledger --batch " + id,
		"export " + id + " > enriched.jsonl",
	} {
		fmt.Fprintln(e.stdout, "  "+self+" "+c)
	}
	code := exitOK
	if out.stopped != "" {
		code = exitQueued
	}
	if web == nil || ctx.Err() != nil {
		return code
	}
	if err := serveDemo(ctx, e, d, cfg, fake, getenv, web, id); err != nil {
		return fail(err)
	}
	return code
}

// listenDemoUI listens on --ui-addr; when that is the default and the port
// is taken (another demo, another server), on a free loopback port instead.
func listenDemoUI(e *env, fs *flag.FlagSet, ui uiFlags) (net.Listener, error) {
	ln, err := listenUI(ui.addr, ui.token)
	if err == nil {
		return ln, nil
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "ui-addr" })
	if explicit {
		return nil, err
	}
	fmt.Fprintf(e.stderr, "triage demo: %v; serving the web window on a free port instead\n", err)
	return listenUI("127.0.0.1:0", ui.token)
}

// serveDemo is the demo's epilogue: the storm is over and the provider now
// accepts the records marked invalid (as if the pipeline had been fixed), a
// worker stays up for requeued records, and the dead-letter page is served
// until ctx ends.
func serveDemo(ctx context.Context, e *env, d *db, cfg *config.Config, fake *fakeprovider.Server,
	getenv func(string) string, web *webUI, batch string) error {
	calm := fakeprovider.Scenario{Name: "after the storm", APIKey: demoAPIKey,
		Poison: fakeprovider.Poison{ContextTokens: 16000, PolicyMarker: "POISON_POLICY"}}
	if err := fake.SetScenario(calm); err != nil {
		return err
	}
	rt, err := worker.New(worker.Options{
		Config: cfg, Pool: d.pool, Keys: []string{"main"}, Getenv: getenv,
		RequeueDeadLetters: safetyNetRequeue(cfg, d.pool),
		Logger:             slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		FetchCooldown:      20 * time.Millisecond,
		FetchPollInterval:  200 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if err := rt.Start(runCtx); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nthe storm is over, and the provider now accepts the records marked POISON_INVALID (as if you\n"+
		"had fixed the pipeline): requeue them from the page and watch them complete.\n")
	fmt.Fprintf(e.stdout, "\ndead letters of this batch: %s/dead-letters?batch=%s\n", web.base, url.QueryEscape(batch))
	fmt.Fprintf(e.stdout, "River UI: %s%s/ — serving until Ctrl-C (--no-ui exits at once)\n", web.base, console.RiverUIPrefix)
	<-ctx.Done()
	stopCtx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), rt.StopGrace())
	defer cancelStop()
	return rt.Stop(stopCtx)
}

// demoDBNote reminds that the commands read the same database.
func demoDBNote(e *env) string {
	if e.getenv(config.EnvDatabaseURL) != "" {
		return "; keep DATABASE_URL set"
	}
	return ""
}

// selfCommand is how to run this triage again from the same directory:
// `go run ./cmd/triage` when the binary was built by `go run` (it lives in a
// go-build temporary directory, gone once the run ends), `bin/triage` when
// it is the working directory's bin/triage (`make demo`), else `triage`.
func selfCommand(e *env) string {
	if e.executable == nil {
		return "triage"
	}
	exe, err := e.executable()
	if err != nil {
		return "triage"
	}
	if builtByGoRun(exe) {
		return "go run ./cmd/triage"
	}
	if e.getwd != nil {
		if wd, err := e.getwd(); err == nil {
			if rel, err := filepath.Rel(wd, exe); err == nil && filepath.ToSlash(rel) == "bin/triage" {
				return "bin/triage"
			}
		}
	}
	return "triage"
}

// builtByGoRun reports whether exe is where `go run` puts the binary it
// builds: $GOTMPDIR/go-buildNNN/b001/exe/NAME.
func builtByGoRun(exe string) bool {
	dir := filepath.Dir(exe)
	if filepath.Base(dir) != "exe" {
		return false
	}
	for d := filepath.Dir(dir); d != filepath.Dir(d); d = filepath.Dir(d) {
		if strings.HasPrefix(filepath.Base(d), "go-build") {
			return true
		}
	}
	return false
}

// enqueueDemo queues the sample under a fresh batch id, demo-<UTC time>,
// with a suffix when two demos start within the same second.
func enqueueDemo(ctx context.Context, d *db, cfg *config.Config, recs []ledger.Record) (string, error) {
	base := defaultBatchID("demo", time.Now())
	for i := 1; ; i++ {
		id := base
		if i > 1 {
			id = fmt.Sprintf("%s-%d", base, i)
		}
		err := enqueue.Batch(ctx, d.pool, "", cfg, enqueue.Params{Pipeline: demoPipeline, Batch: id, Records: recs})
		if errors.Is(err, ledger.ErrBatchExists) && i < 20 {
			continue
		}
		return id, err
	}
}

// topUp pays the fake provider once the key's breaker has opened and then a
// probe has failed (the breaker reopened in a later generation): the human
// who was alerted topping up the account.
type topUp struct {
	fake   *fakeprovider.Server
	opened bool
	gen    int64
	done   bool
}

func (t *topUp) watch(_ context.Context, v batchView, p *progress) {
	ks := v.key
	if t.done || ks == nil {
		return
	}
	switch {
	case !t.opened && ks.State != keys.StateClosed:
		t.opened, t.gen = true, ks.Generation
	case t.opened && ks.State == keys.StateOpen && ks.Generation > t.gen:
		t.fake.TopUp(demoTopUpUSD)
		t.done = true
		p.event(v.now, "demo: topped the account up with $%.2f, as the alerted human would; the next probe will pass", demoTopUpUSD)
	}
}
