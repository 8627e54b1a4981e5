package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/console"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/jobs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/listenaddr"
	"github.com/triage-dev/triage/worker/metrics"
	"github.com/triage-dev/triage/worker/operator"
)

func init() {
	register(command{
		name:    "work",
		summary: "work the queues until interrupted ([--keys k1,k2] [--exit-when-idle] [--metrics-addr ADDR])",
		run:     runWork,
	})
}

// idlePollEvery is how often --exit-when-idle looks for work left.
const idlePollEvery = 500 * time.Millisecond

func runWork(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage work", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	keyList := fs.String("keys", "", "comma-separated keys to work (default: every key of triage.toml)")
	exitIdle := fs.Bool("exit-when-idle", false, "exit once no job of these keys is available, running, scheduled or retryable")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus /metrics and /healthz on this address (e.g. 127.0.0.1:9090)")
	var ui uiFlags
	fs.StringVar(&ui.addr, "ui-addr", "", "also serve the web window (triage's pages and River UI) on this address, e.g. "+console.AddrDefault)
	ui.defineToken(fs)
	setUsage(fs, e,
		"usage: triage work [--keys k1,k2] [--exit-when-idle] [--metrics-addr ADDR] [--ui-addr ADDR [--ui-token T]]",
		"Works the keys' queues until SIGINT/SIGTERM (calls in flight finish first), or with",
		"--exit-when-idle until they are empty. Run as many as you like, on as many machines.",
		"Exit: 0 stopped (with --exit-when-idle: the queues are empty); 4 with --exit-when-idle,",
		"interrupted with jobs left; 1 a runtime failure (metrics or web window address lost);",
		"2 bad usage or configuration.",
	)
	if code, ok := parseNoArgs(e, "work", fs, args); !ok {
		return code
	}
	// River's goroutines log while this one reports: one lock for both.
	stderr := &syncWriter{w: e.stderr}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "triage work: %v\n", err)
		return exitFor(err)
	}
	if err := ui.resolve(e); err != nil {
		return fail(err)
	}
	if *metricsAddr != "" {
		if _, err := listenaddr.Parse(*metricsAddr); err != nil {
			return fail(usageError{fmt.Errorf("--metrics-addr: %w", err)})
		}
	}
	cfg, err := loadConfig(e)
	if err != nil {
		return fail(err)
	}
	var names []string
	if *keyList != "" {
		for _, k := range strings.Split(*keyList, ",") {
			k = strings.TrimSpace(k)
			if _, err := cfg.Key(k); err != nil {
				return fail(usageError{fmt.Errorf("--keys: %w", err)})
			}
			names = append(names, k)
		}
	} else {
		for _, k := range cfg.Keys {
			names = append(names, k.Name)
		}
	}
	d, err := openDB(ctx, e, cfg)
	if err != nil {
		return fail(err)
	}
	defer d.Close()
	log := newLogger(stderr, slog.LevelInfo)

	// The worker and the metrics server run on a context of their own: an
	// interrupt stops them through Stop, after the calls in flight.
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	opts := worker.Options{Config: cfg, Pool: d.pool, Keys: names, Getenv: e.getenv, Logger: log,
		RequeueDeadLetters: safetyNetRequeue(cfg, d.pool)}
	served := make(chan error, 1)
	if *metricsAddr != "" {
		all := make([]string, len(cfg.Keys))
		for i, k := range cfg.Keys {
			all[i] = k.Name
		}
		budgets := map[string]float64{}
		for _, k := range cfg.Keys {
			budgets[k.Name] = k.RetryBudget
		}
		// Bound before the worker starts: a port in use is the flag's
		// problem, said before any call is made.
		ln, _, err := listenaddr.Listen(ctx, *metricsAddr, "metrics", log)
		if err != nil {
			return fail(usageError{fmt.Errorf("--metrics-addr: %w", err)})
		}
		m, err := metrics.New(d.pool, keys.DefaultStore(d.pool), metrics.Options{Keys: all, Logger: log, RetryBudgets: budgets, RetryBudget: opts.RetryBudget()})
		if err != nil {
			ln.Close()
			return fail(err)
		}
		opts.Observer = m
		go func() { served <- m.ServeListener(runCtx, ln) }()
	}
	meter := newBatchMeter(opts.Observer)
	opts.Observer = meter
	rt, err := worker.New(opts)
	if err != nil {
		return fail(err)
	}
	// The web window comes up before the worker, so a port in use fails
	// the command before it has taken any job.
	var web *webUI
	if ui.addr != "" {
		ln, err := listenUI(ui.addr, ui.token)
		if err == nil {
			web, err = startUI(runCtx, d, cfg, ln, ui.token, log)
		}
		if err != nil {
			return fail(fmt.Errorf("--ui-addr: %w", err))
		}
		defer web.Close()
	}
	if err := rt.Start(runCtx); err != nil {
		return fail(err)
	}
	log.Info("working", "keys", strings.Join(names, ","), "database", d.where)
	var uiDone <-chan struct{}
	var webui *webUI
	if web != nil {
		uiDone, webui = web.done, web
		log.Info("serving the web window", "url", web.base+"/", "river_ui", web.base+console.RiverUIPrefix+"/")
	}

	code := exitOK
	dbDown := false
	var idle <-chan time.Time
	if *exitIdle {
		t := time.NewTicker(idlePollEvery)
		defer t.Stop()
		idle = t.C
	}
	// Which batches this process works: a batch queued earlier (or by
	// mistake) is worked too, and a person must see it.
	seen := time.NewTicker(time.Second)
	defer seen.Stop()
	stopped := false
wait:
	for {
		select {
		case <-seen.C:
			for _, b := range meter.Fresh() {
				log.Info("working batch", "batch", b)
			}
		case <-ctx.Done():
			log.Info("stopping: calls in flight finish first")
			stopped = true
			break wait
		case err := <-served:
			// Serve returns only on failure while runCtx lives.
			fmt.Fprintf(stderr, "triage work: --metrics-addr %s: %v\n", *metricsAddr, err)
			code = exitRuntime
			break wait
		case <-uiDone:
			fmt.Fprintf(stderr, "triage work: --ui-addr %s: %v\n", ui.addr, webui.err)
			code = exitRuntime
			break wait
		case <-idle:
			n, err := jobs.Left(ctx, d.pool, opts.Schema, names)
			if err != nil {
				if ctx.Err() != nil {
					// Interrupted during the look: a stop like any other
					// (it exited 0 with jobs left when the signal came
					// while this query ran).
					log.Info("stopping: calls in flight finish first")
					stopped = true
					break wait
				}
				if ledger.Unreachable(err) {
					// River reconnects by itself; so does this look.
					if !dbDown {
						dbDown = true
						log.Warn("database unreachable, retrying", "err", err)
					}
					continue
				}
				fmt.Fprintf(stderr, "triage work: %v\n", err)
				code = exitRuntime
				break wait
			}
			if dbDown {
				dbDown = false
				log.Info("database reachable again")
			}
			if n == 0 {
				// Records whose job was cancelled or deleted by hand are
				// dead-lettered before leaving, so their batches settle.
				rt.Sweep(ctx)
				log.Info("idle: no job left in the keys' queues")
				// Batches paused by hand still hold records nobody
				// finished: idle, but not done.
				paused, err := jobs.OfPausedBatches(ctx, d.pool, opts.Schema, names)
				if err != nil {
					if ctx.Err() != nil {
						stopped = true
						break wait
					}
					fmt.Fprintf(stderr, "triage work: %v\n", err)
					code = exitRuntime
					break wait
				}
				for _, b := range slices.Sorted(maps.Keys(paused)) {
					fmt.Fprintf(stderr, "triage work: idle, but batch %s is paused by hand with %d %s queued (`triage batch resume %s` lets them run)\n",
						cell(b), paused[b], plural(paused[b], "job", "jobs"), cell(b))
					code = exitQueued
				}
				break wait
			}
		}
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rt.StopGrace())
	defer cancel()
	if err := rt.Stop(stopCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "triage work: stop: %v\n", err)
		code = max(code, exitRuntime)
	}
	if *exitIdle && stopped && code == exitOK {
		// --exit-when-idle promises an empty queue: stopped before, it
		// says what is left and exits as `run` does with jobs queued.
		left, err := jobs.Left(context.WithoutCancel(ctx), d.pool, opts.Schema, names)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "triage work: stopped before the queues were empty; counting the jobs left: %v\n", err)
			code = exitQueued
		case left > 0:
			fmt.Fprintf(stderr, "triage work: stopped with %d %s left in the keys' queues (`triage work --exit-when-idle` finishes them)\n",
				left, plural(left, "job", "jobs"))
			code = exitQueued
		}
	}
	return code
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// safetyNetRequeue is worker.Options.RequeueDeadLetters: the dead letters
// of a rejection streak go back through the operator's requeue, as
// `triage dlq requeue ID...` would send them.
func safetyNetRequeue(cfg *config.Config, pool *pgxpool.Pool) func(ctx context.Context, ids []int64) (int, error) {
	return func(ctx context.Context, ids []int64) (int, error) {
		res, err := operator.Requeue(ctx, pool, cfg, operator.Selection{IDs: ids}, operator.RequeueOptions{By: "safety_net"})
		return res.Requeued, err
	}
}

// fleetRetryBudget is the fleet retry budget `triage work` and `triage
// run` run their workers with (their worker.Options set no RetryWindow or
// RetryFloor): `triage keys` and `triage ui`, which run no worker, show
// the budget with it.
func fleetRetryBudget() decide.RetryBudget { return worker.Options{}.RetryBudget() }
