package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/metrics"
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
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: triage work [--keys k1,k2] [--exit-when-idle] [--metrics-addr ADDR]")
		fmt.Fprintln(e.stderr, "Works the keys' queues until SIGINT/SIGTERM (calls in flight finish first), or with")
		fmt.Fprintln(e.stderr, "--exit-when-idle until they are empty. Run as many as you like, on as many machines.")
		fs.PrintDefaults()
	}
	if code, ok := parseNoArgs(e, "work", fs, args); !ok {
		return code
	}
	// River's goroutines log while this one reports: one lock for both.
	stderr := &syncWriter{w: e.stderr}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "triage work: %v\n", err)
		return exitFor(err)
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
	opts := worker.Options{Config: cfg, Pool: d.pool, Keys: names, Getenv: e.getenv, Logger: log}
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
		m := metrics.New(d.pool, keys.NewStore(d.pool, keys.StoreConfig{}), metrics.Options{Keys: all, Logger: log, RetryBudgets: budgets})
		opts.Observer = m
		go func() { served <- m.Serve(runCtx, *metricsAddr) }()
	}
	rt, err := worker.New(opts)
	if err != nil {
		return fail(err)
	}
	if err := rt.Start(runCtx); err != nil {
		return fail(err)
	}
	log.Info("working", "keys", strings.Join(names, ","), "database", d.where)

	code := exitOK
	var idle <-chan time.Time
	if *exitIdle {
		t := time.NewTicker(idlePollEvery)
		defer t.Stop()
		idle = t.C
	}
wait:
	for {
		select {
		case <-ctx.Done():
			log.Info("stopping: calls in flight finish first")
			break wait
		case err := <-served:
			// Serve returns only on failure while runCtx lives.
			fmt.Fprintf(stderr, "triage work: --metrics-addr %s: %v\n", *metricsAddr, err)
			code = exitRuntime
			break wait
		case <-idle:
			n, err := worker.JobsLeft(ctx, d.pool, opts.Schema, names)
			if err != nil {
				if ctx.Err() != nil {
					break wait
				}
				fmt.Fprintf(stderr, "triage work: %v\n", err)
				code = exitRuntime
				break wait
			}
			if n == 0 {
				// Records whose job was cancelled or deleted by hand are
				// dead-lettered before leaving, so their batches settle.
				rt.Sweep(ctx)
				log.Info("idle: no job left in the keys' queues")
				break wait
			}
		}
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopGrace)
	defer cancel()
	if err := rt.Stop(stopCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "triage work: stop: %v\n", err)
		code = max(code, exitRuntime)
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
