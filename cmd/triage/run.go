package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/console"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/operator"
)

func init() {
	register(command{
		name:    "run",
		summary: "enqueue a JSONL file and work it until it settles (--pipeline P [--batch B] [--max-wait D] [--budget USD] [--deadline D] [--no-cache] FILE|-)",
		run:     runRun,
	})
}

// pollEvery is how often a run reads its batch's status.
const pollEvery = 250 * time.Millisecond

// usdFlag is an optional dollar amount: unset is nil.
type usdFlag struct{ v *float64 }

func (f *usdFlag) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.FormatFloat(*f.v, 'f', -1, 64)
}

func (f *usdFlag) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return fmt.Errorf("want a positive amount of USD, got %q", s)
	}
	f.v = &v
	return nil
}

func runRun(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage run", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var f batchFlags
	f.define(fs)
	maxWait := fs.Duration("max-wait", 0, "stop after this long even if jobs are still queued (0: wait until settled)")
	var budget usdFlag
	fs.Var(&budget, "budget", "spend cap of the batch in USD (default: the pipeline's budget_usd)")
	interval := fs.Duration("progress-interval", progressIntervalDefault, "how often a progress line is printed when stderr is not a terminal")
	var ui uiFlags
	fs.StringVar(&ui.addr, "ui-addr", "", "serve the web window (triage's pages and River UI) on this address while the run lasts, e.g. "+console.AddrDefault)
	ui.defineToken(fs)
	dbWait := fs.Duration("db-wait", dbWaitDefault, "how long to ride out an unreachable database before stopping with exit 4 (the jobs stay queued)")
	setUsage(fs, e,
		"usage: triage run --pipeline P [--batch B] [--max-wait D] [--budget USD] [--deadline D] [--no-cache] [--dry-run] [--ui-addr ADDR [--ui-token T]] FILE|-",
		"Enqueues the file as one batch and works it in this process until every record is",
		"completed or dead-lettered, then prints a summary. While the key is exhausted it waits",
		"(one probe per probe_interval); when the batch's budget is spent it stops.",
		"Exit: 0 settled; 3 settled with dead letters; 2 the provider refuses the key as invalid",
		"(never answered in this run); 4 stopped with jobs still queued",
		"(--max-wait passed, budget reached, interrupted, database unreachable for --db-wait);",
		"`triage work --exit-when-idle` finishes them. A database blip shorter than --db-wait is",
		"ridden out: answers that arrive meanwhile are held and stored when it is back.",
	)
	if code, ok := f.parse(e, "run", fs, args); !ok {
		return code
	}
	if f.dryRun {
		return runDryRun(ctx, e, "run", f, budget.v)
	}
	fail := func(err error) int { return failCmd(e, "run", err) }
	if *maxWait < 0 {
		return fail(usageError{errors.New("--max-wait must not be negative")})
	}
	if *interval < 0 {
		return fail(usageError{errors.New("--progress-interval must not be negative")})
	}
	if err := ui.resolve(e); err != nil {
		return fail(err)
	}
	var ln net.Listener
	if ui.addr != "" {
		// Listen before enqueueing: a port in use fails the run before it
		// has written anything.
		var err error
		if ln, err = listenUI(ui.addr, ui.token); err != nil {
			return fail(fmt.Errorf("--ui-addr: %w", err))
		}
	}
	if *dbWait <= 0 {
		return fail(usageError{errors.New("--db-wait must be positive")})
	}
	cfg, d, id, n, err := enqueueFile(ctx, e, f, budget.v)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return fail(err)
	}
	defer d.Close()
	if ln != nil {
		u, err := startUI(ctx, d, cfg, ln, ui.token, runUILogger(e.stderr))
		if err != nil {
			return fail(fmt.Errorf("--ui-addr: %w", err))
		}
		defer u.Close()
		fmt.Fprintf(e.stderr, "web window: %s/batches/%s (River UI: %s%s/)\n", u.base, id, u.base, console.RiverUIPrefix)
	}
	key, _, err := cfg.KeyFor(f.pipeline)
	if err != nil {
		return fail(usageError{err})
	}
	if d.shadow != "" {
		fmt.Fprintf(e.stderr, "database: %s\n", d.where)
	}
	fmt.Fprintf(e.stderr, "enqueued %d records as batch %s%s\n", n, id, deadlineNote(ctx, d, id))
	pl, err := cfg.Pipeline(f.pipeline)
	if err != nil {
		return fail(usageError{err})
	}
	out, err := workBatch(ctx, e, batchRun{cfg: cfg, d: d, batch: id, key: key.Name, fallbackKeys: cfg.FallbackKeys(pl),
		maxWait: *maxWait, interval: *interval, dbWait: *dbWait})
	if err != nil {
		return fail(err)
	}
	return out.exitCode()
}

// batchRun is one batch worked to the end in this process.
type batchRun struct {
	cfg   *config.Config
	d     *db
	batch string
	key   string
	// fallbackKeys are the keys of the pipeline's fallback models: a job
	// moved to a fallback runs on its key's queue, worked here too.
	fallbackKeys []string
	// maxWait stops the run with jobs still queued; 0: no limit.
	maxWait time.Duration
	// interval between plain progress lines (stderr not a terminal).
	interval time.Duration
	// dbWait: how long an unreachable database is ridden out before the
	// run stops (run's --db-wait; demo's is dbWaitDefault); 0 rides it out
	// for as long as it lasts.
	dbWait time.Duration
	// opts tunes the worker; Config, Pool, Keys, Getenv and Logger are set
	// by workBatch.
	opts worker.Options
	// getenv reads the API keys' variables; default the env's.
	getenv func(string) string
	// watch, if set, is called on every poll (the demo tops up its fake
	// provider from it).
	watch func(ctx context.Context, v batchView, p *progress)
}

// batchView is one poll of a running batch.
type batchView struct {
	st  ledger.Status
	key *keys.KeyStatus
	now time.Time
}

// runOutcome is how a run ended.
type runOutcome struct {
	st      ledger.Status
	stopped string // why it stopped before settling; "" when settled
	dbDown  bool   // stopped because the database stayed unreachable
	// invalidKey: stopped because the provider refuses the key itself, which
	// never succeeded in this run: no wait makes it work (exit 2).
	invalidKey bool
	wall       time.Duration
}

func (o runOutcome) exitCode() int {
	switch {
	case o.stopped != "" && o.invalidKey:
		return exitUsage
	case o.stopped != "":
		return exitQueued
	case o.st.DeadLettered > 0:
		return exitDeadLetters
	default:
		return exitOK
	}
}

// workBatch runs a worker for r.key until r.batch settles, its budget is
// spent, maxWait passes or ctx ends; draws the progress on stderr; then
// stops the worker gracefully and writes the summary on stdout.
func workBatch(ctx context.Context, e *env, r batchRun) (runOutcome, error) {
	tty := isTerminal(e.stderr)
	p := newProgress(e.stderr, tty, r.interval)
	p.columns = func() int { return terminalWidth(e.stderr, e.getenv) }
	opts := r.opts
	opts.Config, opts.Pool, opts.Keys = r.cfg, r.d.pool, append([]string{r.key}, r.fallbackKeys...)
	if r.getenv == nil {
		r.getenv = e.getenv
	}
	opts.Getenv = r.getenv
	if opts.RequeueDeadLetters == nil {
		opts.RequeueDeadLetters = safetyNetRequeue(r.cfg, r.d.pool)
	}
	var summary *summaryHandler
	if opts.Logger == nil {
		// Alerts (ERROR) only: per-record events would drown the progress.
		// The dead letters and the ledger keep the detail. River's own
		// errors while the database is away repeat every second: one line
		// per message and a count.
		hopts := &slog.HandlerOptions{Level: slog.LevelError}
		var h slog.Handler = slog.NewJSONHandler(p, hopts)
		if tty {
			h = slog.NewTextHandler(p, hopts)
		}
		summary = newSummaryHandler(h, logRepeatWindow)
		opts.Logger = slog.New(summary)
	}
	meter := newBatchMeter(opts.Observer)
	opts.Observer = meter
	rt, err := worker.New(opts)
	if err != nil {
		return runOutcome{}, err
	}
	// The worker runs on a context of its own: an interrupt stops it
	// gracefully through Stop, not by cancelling the calls in flight.
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	start := time.Now()
	if err := rt.Start(runCtx); err != nil {
		return runOutcome{}, err
	}
	pace := func() (keys.PaceState, bool) { return rt.Pacing(r.key) }
	out, loopErr := pollBatch(ctx, rt.Store(), pace, r, p, start, meter)
	if summary != nil {
		if s := summary.flush(); s != "" {
			p.event(time.Now(), "%s", s)
		}
	}
	p.finish()

	grace := stopGraceFor(out, r.opts, rt.StopGrace())
	if out.dbDown {
		p.event(time.Now(), "stopping: answers already received are held until the database is back (up to %s)",
			grace.Round(time.Second))
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := rt.Stop(stopCtx); err != nil {
		fmt.Fprintf(p, "triage: stopping the worker: %v\n", err)
	}
	out.wall = time.Since(start)
	for _, b := range meter.Fresh() {
		if b != r.batch {
			p.event(time.Now(), "%s", otherBatchNote(b, r.batch))
		}
	}
	if loopErr != nil {
		return out, loopErr
	}
	// Calls in flight at the stop may have settled the batch meanwhile.
	if st, _, err := batchStatus(context.WithoutCancel(ctx), r.d.pool, rt.Store(), r.batch); err == nil {
		out.st = st
		if st.State == ledger.BatchSettled {
			out.stopped, out.invalidKey = "", false
		}
	}
	if out.dbDown && out.stopped != "" {
		fmt.Fprintf(p, "stopped: %s. The batch's jobs are safe in the queue: when the database is back, "+
			"`triage work --exit-when-idle` finishes them and `triage status %s` shows the batch "+
			"(a job that was running when it went away is handed back by River's rescuer after a few minutes)\n", out.stopped, r.batch)
		return out, nil
	}
	if out.stopped != "" {
		fmt.Fprintf(p, "stopped: %s; %d records still queued (`triage work` finishes them)\n", out.stopped, out.st.Pending)
	}
	if err := writeSummary(ctx, e.stdout, r.d, out); err != nil {
		return out, err
	}
	writeOthers(e.stdout, meter.Others(r.batch))
	return out, nil
}

// pollBatch draws progress until the batch settles or the run must stop,
// narrating the key's breaker as it opens, fails a probe and closes.
func pollBatch(ctx context.Context, store *keys.Store, pace func() (keys.PaceState, bool), r batchRun, p *progress, start time.Time, meter *batchMeter) (runOutcome, error) {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var deadline <-chan time.Time
	if r.maxWait > 0 {
		t := time.NewTimer(r.maxWait)
		defer t.Stop()
		deadline = t.C
	}
	var prev *keys.KeyStatus
	var last ledger.Status
	// How long the key's submitter gathers lines before it sends them, for
	// the progress line of a batch-mode run.
	gather := batchGather(r.opts.Batch, r.cfg, r.key)
	down := outage{limit: r.dbWait}
	for {
		now := time.Now()
		st, ks, err := batchStatus(ctx, r.d.pool, store, r.batch)
		if err != nil {
			if ctx.Err() != nil {
				return runOutcome{st: last, stopped: "interrupted"}, nil
			}
			if !ledger.Unreachable(err) {
				return runOutcome{}, err
			}
			wait, first, over := down.failed(now)
			if first {
				p.event(now, "database unreachable, retrying (for up to %s; answers that arrive meanwhile are held)", down.limit)
			}
			if over {
				return runOutcome{st: last, dbDown: true,
					stopped: fmt.Sprintf("the database has been unreachable for %s (--db-wait)", down.limit)}, nil
			}
			select {
			case <-ctx.Done():
				return runOutcome{st: last, stopped: "interrupted"}, nil
			case <-time.After(wait):
			}
			continue
		}
		if d := down.reached(now); d > 0 {
			p.event(now, "database reachable again after %s", d.Round(100*time.Millisecond))
		}
		last = st
		for _, b := range meter.Fresh() {
			if b != r.batch {
				p.event(now, "%s", otherBatchNote(b, r.batch))
			}
		}
		narrateKey(p, prev, ks, now)
		prev = ks
		if ks != nil && ks.State != keys.StateClosed && keys.InvalidKey(ks.Reason) && !meter.Succeeded(r.key) {
			// A key the provider refuses as such, that never answered in
			// this run: waiting for probes would stall until someone comes.
			env := "its environment variable"
			if k, err := r.cfg.Key(r.key); err == nil {
				env = "$" + k.APIKeyEnv
			}
			p.show(progressLine(st, ks, time.Since(start), p.tty), now, true)
			return runOutcome{st: st, invalidKey: true, stopped: fmt.Sprintf("the provider refuses key %s as invalid (%s): the API key in %s is wrong or revoked, "+
				"and a top-up will not help; fix it, then `triage keys resume %s`", r.key, ks.Reason, env, r.key)}, nil
		}
		if r.watch != nil {
			r.watch(ctx, batchView{st: st, key: ks, now: now}, p)
		}
		done := st.State == ledger.BatchSettled || st.State == ledger.BatchPausedBudget
		ps, _ := pace()
		line := withPacing(progressLine(st, ks, time.Since(start), p.tty), st, ps, p.tty)
		p.show(withBatchWait(line, st, gather, deadlineNear(r.cfg, st, now), p.tty), now, done)
		switch st.State {
		case ledger.BatchSettled:
			return runOutcome{st: st}, nil
		case ledger.BatchPausedBudget:
			return runOutcome{st: st, stopped: "the batch's budget is spent"}, nil
		}
		select {
		case <-ctx.Done():
			return runOutcome{st: st, stopped: "interrupted"}, nil
		case <-deadline:
			p.show(progressLine(st, ks, time.Since(start), p.tty), time.Now(), true)
			return runOutcome{st: st, stopped: fmt.Sprintf("--max-wait %s passed", r.maxWait)}, nil
		case <-tick.C:
		}
	}
}

// deadlineNear reports whether st's pipeline is in mode auto and its
// deadline is within the pipeline's auto_margin (decide.BatchDeadlineNear):
// its lines then go sync.
func deadlineNear(cfg *config.Config, st ledger.Status, now time.Time) bool {
	pl, err := cfg.Pipeline(st.Pipeline)
	return err == nil && decide.BatchDeadlineNear(pl, st.Deadline, now)
}

// narrateKey prints the breaker's transitions between two polls.
func narrateKey(p *progress, prev, cur *keys.KeyStatus, now time.Time) {
	if cur == nil {
		return
	}
	wasClosed := prev == nil || prev.State == keys.StateClosed
	switch {
	case wasClosed && cur.State != keys.StateClosed && keys.InvalidKey(cur.Reason):
		p.event(now, "key %s refused as invalid (%s): the API key is wrong or revoked, not out of money", cur.Key, cur.Reason)
	case wasClosed && cur.State != keys.StateClosed:
		p.event(now, "key %s exhausted (%s): its jobs stay queued; one probe at a time until it answers", cur.Key, cur.Reason)
	case !wasClosed && cur.State == keys.StateClosed:
		p.event(now, "key %s resumed: the probe succeeded, its queue drains again", cur.Key)
	case !wasClosed && cur.State == keys.StateOpen && cur.Generation > prev.Generation:
		p.event(now, "key %s: the probe failed, still exhausted; %s", cur.Key, operator.DescribeKey(cur))
	}
}

// writeSummary prints what the run did: records, calls and spend per class,
// dead letters by reason, wall time.
func writeSummary(ctx context.Context, w io.Writer, d *db, out runOutcome) error {
	ctx = context.WithoutCancel(ctx)
	st := out.st
	total, byClass, err := usageByClass(ctx, d, ledger.AttemptFilter{Batch: st.Batch})
	if err != nil {
		return err
	}
	dls, err := ledger.ListDeadLetters(ctx, d.pool, ledger.DeadLetterFilter{Batch: st.Batch})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nbatch %s (pipeline %s): %d records, %d completed, %d dead-lettered, %d pending\n\n",
		st.Batch, st.Pipeline, st.Total, st.Completed, st.DeadLettered, st.Pending)
	writeUsageTable(w, total, byClass, false)
	fmt.Fprintf(w, "\nspend %s, possibly billed %s (outcome unknown: sent with no answer, or answered unreadably)\n", usd(st.SpendUSD), usd(st.PossiblyBilledUSD))
	if st.BatchSavedUSD != nil {
		notRun, err := ledger.BatchLinesNotRun(ctx, d.pool, st.Batch)
		if err != nil {
			return err
		}
		if notRun > 0 {
			fmt.Fprintf(w, "%d batch %s never run by the provider (expired, cancelled, or taken back for a sync call near the deadline) "+
				"counted as throttled, reason %s: not billed, no attempt counted, sent again\n",
				notRun, plural(notRun, "line", "lines"), ledger.ReasonBatchNotRun)
		}
		for _, m := range st.ByMode {
			// The lines the provider ran: those never run cost nothing and
			// are explained above.
			if ran := m.Calls - notRun; m.Mode == ledger.ModeBatch && m.SyncCostUSD != nil && ran > 0 {
				fmt.Fprintf(w, "batch mode: %d %s at batch prices, %s (%s at sync prices): saved %s\n",
					ran, plural(ran, "line", "lines"), usd(m.SpendUSD), usd(*m.SyncCostUSD), usd(*st.BatchSavedUSD))
			}
		}
	}
	if len(dls) > 0 {
		type reasonKey struct{ class, reason string }
		counts := map[reasonKey]int{}
		var order []reasonKey
		for _, dl := range dls {
			k := reasonKey{dl.Class, dl.Reason}
			if counts[k] == 0 {
				order = append(order, k)
			}
			counts[k]++
		}
		fmt.Fprintln(w, "\ndead letters:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  class\treason\trecords")
		for _, k := range order {
			fmt.Fprintf(tw, "  %s\t%s\t%d\n", cell(k.class), cell(k.reason), counts[k])
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nwall time %s\n", out.wall.Round(100*time.Millisecond))
	return nil
}

// runUILogger is the web window's logger under `triage run`: errors only,
// in the format of the run's own log lines (text on a terminal, JSON
// elsewhere), so stderr carries one format.
func runUILogger(w io.Writer) *slog.Logger {
	return newLogger(w, slog.LevelError)
}
