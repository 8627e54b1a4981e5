package jobrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/tidwall/gjson"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/facts"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/jobs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/provider"
)

// jobWorker is the River worker for Args.
type jobWorker struct {
	river.WorkerDefaults[jobargs.Args]
	rt *Runner
}

// Timeout bounds one run of a job: the key's longest call (its timeout, or
// its streams' ceiling) plus time for the ledger writes around it.
func (w *jobWorker) Timeout(job *river.Job[jobargs.Args]) time.Duration {
	if _, _, k, err := w.rt.lookup(job.Args); err == nil {
		return k.callMax + w.rt.opts.JobMargin
	}
	return 0
}

// NextRetry is jittered exponential backoff for runs that failed for the
// worker's own reasons (a database error, a panic): a failed call is not a
// River error but a snooze decided by decide.After, so no retry-after hint
// has to reach this method.
func (w *jobWorker) NextRetry(job *river.Job[jobargs.Args]) time.Time {
	return time.Now().Add(decide.Backoff(job.Attempt, w.rt.opts.BackoffBase, w.rt.opts.BackoffCap))
}

// lookup finds the job's pipeline, the model it runs on (its own, or the
// fallback it was moved to) and that model's key.
func (r *Runner) lookup(a jobargs.Args) (*config.Pipeline, *config.Model, *Key, error) {
	p, err := r.cfg.Pipeline(a.Pipeline)
	if err != nil {
		return nil, nil, nil, err
	}
	model := p.Model
	if a.Model != "" {
		model = a.Model
	}
	m, err := r.cfg.Model(model)
	if err != nil {
		return nil, nil, nil, err
	}
	k := r.keys[m.Key]
	if k == nil {
		return nil, nil, nil, fmt.Errorf("key %q is not worked by this process", m.Key)
	}
	return p, m, k, nil
}

// call carries what one run of a job knows, for apply.
type call struct {
	job       *river.Job[jobargs.Args]
	pipeline  *config.Pipeline
	model     *config.Model
	key       *Key
	req       provider.Request
	adm       keys.Admission
	attemptID int64
	res       provider.Result
	verdict   classify.Verdict
	output    json.RawMessage
	// hadAmbiguous: an earlier send under the idempotency key got no answer.
	hadAmbiguous bool
	retry        bool
	// calls is the job's calls counted against max_attempts, this one
	// included; 0 before the ledger look-up.
	calls int
	// hash is the rendered request's hash.
	hash string
	// cacheKey is the request's response-cache key ("": the pipeline does
	// not cache); cached is the cache's answer, fromCache says the run
	// completes with it (cache.go).
	cacheKey  string
	cached    ledger.CachedResponse
	fromCache bool
	// change is the job's one change (metaChange), applied by render.
	change decide.Change
	// partial is what a stream cut midway delivered, for the ledger; nil
	// otherwise. partialAccepted: it is stored as the result.
	partial         *ledger.Partial
	partialAccepted bool
	// line is the job's open batch line (pipelines with mode batch or
	// auto; ID 0: none); lineID is set when this run applies its answer
	// (batchline.go).
	line   ledger.BatchLine
	lineID int64
	// called: this run sent its request to the provider (set at the one
	// place that sends). Only such a run settles a probe claim (report).
	called bool
	// found: the result is a lost call's stored answer, found by a look-up
	// (lookup.go); its attempt is settled, no call is made.
	found bool
	// resumed: the result is a background response an earlier run created
	// and left running, polled by this run (background.go): the earlier
	// attempts under the key are settled by this one.
	resumed bool
	// jobKey and jobModel are the job's own key and model (lookUp); key
	// and model point at an open line's sender instead (lineSender).
	jobKey   *Key
	jobModel *config.Model
	// prior is what the ledger knew about earlier sends (admit).
	prior ledger.Prior
	// intentID is the intent row admit wrote with the prior read for a
	// first send (ledger.QueuePriorOutcomeAndIntent), not yet taken by
	// reserve for the call; 0 when none is pending. Every exit that does
	// not send withdraws it (withdrawIntent): in the transaction the exit
	// writes anyway, or alone.
	intentID int64
	// paced: the run took its pace before admit (readyNow), so paceStep
	// does not wait again.
	paced bool
	// watchReset: the call succeeded, which ends the key's safety-net
	// runs (ledger.ResetWatchRun): in the completion's round trip, or
	// alone when the run ends otherwise (resetWatchRun). watchAnsweredAt
	// is when the success was answered: a run of throttles that began
	// after it goes on.
	watchReset      bool
	watchAnsweredAt time.Time
	// done reports the call's outcome to the breakers (admit, readmit);
	// release gives back the concurrency slot (slot), nil before.
	done    keys.Done
	release func()
	// estTokens is the request's estimated input tokens, paced and then
	// calibrated with the usage the provider reports (paceStep).
	estTokens int
}

// Work runs one job as its steps, in order: look up, check, render, admit,
// batch, budget, slot, pace, reserve, send, classify, decide, apply. Each
// step before the call ends the run with a reaction (decide.Before on what
// is known so far) or goes on; the call's outcome is decided by
// decide.After; apply is the only place that acts on a reaction.
func (w *jobWorker) Work(ctx context.Context, job *river.Job[jobargs.Args]) error {
	rt := w.rt
	if rt.workCtx != nil {
		ctx = rt.workCtx(ctx, job.ID)
	}
	c, rx := rt.lookUp(job)
	if rx.Kind != decide.ReactGo {
		return rt.apply(ctx, c, rx, keys.Report{})
	}
	b, rx, err := rt.check(ctx, c)
	if err != nil {
		return err
	}
	if rx.Kind == decide.ReactGo {
		rx = c.render()
	}
	if rx.Kind != decide.ReactGo {
		rt.releaseProbe(ctx, c)
		return rt.apply(ctx, c, rx, keys.Report{})
	}
	if err := rt.admit(ctx, c, &b); err != nil {
		return err
	}
	// A first send's intent, written by admit, is the call's unless an
	// exit below ends the run without sending: then it is withdrawn, in the
	// transaction the exit writes (completeOnce, deadLetter) or here.
	defer rt.withdrawIntent(ctx, c)
	// Every exit reports to the breakers exactly once; this one, for the
	// exits before the call, gives a probe claim back. The concurrency
	// slot (slot) is given back before.
	defer func() { rt.report(ctx, c, c.done, keys.OutcomeNone) }()
	defer c.releaseSlot()
	if rx, err := rt.admitted(ctx, c, &b); err != nil || rx.Kind != decide.ReactGo {
		return rt.end(ctx, c, rx, err)
	}
	if handled, err := rt.batch(ctx, c, b); handled {
		return err
	}
	if rx, err := rt.budget(ctx, c, &b); err != nil || rx.Kind != decide.ReactGo {
		return rt.end(ctx, c, rx, err)
	}
	if rx, err := rt.slot(ctx, c, &b); err != nil || rx.Kind != decide.ReactGo {
		return rt.end(ctx, c, rx, err)
	}
	if rx, err := rt.paceStep(ctx, c, &b); err != nil || rx.Kind != decide.ReactGo {
		return rt.end(ctx, c, rx, err)
	}
	if rx, err := rt.reserve(ctx, c, &b); err != nil || rx.Kind != decide.ReactGo {
		return rt.end(ctx, c, rx, err)
	}
	defer rt.resetWatchRun(ctx, c)
	a, sendErr := rt.send(ctx, c)
	rt.classify(ctx, c, &a, sendErr)
	rep := rt.report(ctx, c, c.done, facts.BreakerOutcome(a))
	a.Storm = facts.Storm(rep.Storm)
	a.Held = rt.watchCall(ctx, c, a)
	return rt.apply(ctx, c, decide.After(a), rep)
}

// end ends a run at a step: its error, or the reaction it decided.
func (r *Runner) end(ctx context.Context, c *call, rx decide.Reaction, err error) error {
	if err != nil {
		return err
	}
	return r.apply(ctx, c, rx, keys.Report{})
}

// lookUp finds the job's pipeline, model and key (lookup); a job this
// process cannot run is dead-lettered (config_error).
func (r *Runner) lookUp(job *river.Job[jobargs.Args]) (*call, decide.Reaction) {
	p, m, k, err := r.lookup(job.Args)
	if err != nil {
		return &call{job: job}, decide.DeadLetter(classify.Rejected, decide.ReasonConfig, err.Error())
	}
	return &call{job: job, pipeline: p, model: m, key: k, jobModel: m, jobKey: k}, decide.Reaction{Kind: decide.ReactGo}
}

// check decides on what the job itself says (its runs, age and snoozes)
// before any round trip; a record about to end reads its open line
// first (the open-line rule).
func (r *Runner) check(ctx context.Context, c *call) (decide.BeforeCall, decide.Reaction, error) {
	job, p, k := c.job, c.pipeline, c.key
	b := decide.BeforeCall{
		Attempt: job.Attempt, MaxAttempts: p.MaxAttempts, AmbiguousRetries: p.AmbiguousRetries, Policy: k.cfg.Ambiguous,
		Age: time.Since(job.CreatedAt), MaxAge: r.opts.MaxAge, OwnSnoozes: ownSnoozes(job), MaxSnoozes: p.MaxSnoozes,
		LineWait: r.batchWait(),
	}
	rx := decide.Before(b)
	if rx.Kind == decide.ReactDeadLetter {
		// About to end the record before the admission round trip read its
		// line: an open one decides first (the open-line rule), and a
		// result another run of the job stored (a rescued run) completes it.
		l, err := ledger.OpenBatchLine(ctx, r.pool, job.ID, job.Args.Batch)
		if err != nil {
			return b, rx, fmt.Errorf("open batch line: %w", err)
		}
		b.Line = facts.Line(l.Hold())
		c.line = l
		if b.ResultStored, err = ledger.HasResult(ctx, r.pool, job.Args.Batch, job.Args.RecordID); err != nil {
			return b, rx, err
		}
		rx = decide.Before(b)
	}
	return b, rx, nil
}

// releaseProbe: a job a Supervisor dispatched as the probe holds a claim
// made on its behalf; one that ends before its admission gives it back, or
// the key stays half-open until the lease runs out.
func (r *Runner) releaseProbe(ctx context.Context, c *call) {
	k, job := c.key, c.job
	if job.Queue == keys.ProbeQueueName(k.cfg.Name) {
		if _, err := r.store.ReleaseProbeOfJob(context.WithoutCancel(ctx), k.cfg.Name, job.ID); err != nil {
			r.log.ErrorContext(ctx, "release probe", "key", k.cfg.Name, "job_id", job.ID, "err", err)
		}
	}
}

// admit is the one round trip before the call: the breakers first (a key
// known to be exhausted or in a storm gets no call at all), both breakers
// and the pause in one statement, and with them what the ledger knows
// about this request from earlier sends, the response cache, the job's
// open line and its batch's hold.
func (r *Runner) admit(ctx context.Context, c *call, b *decide.BeforeCall) error {
	job, k := c.job, c.key
	var (
		hold ledger.BatchState
		pi   ledger.PriorIntent
	)
	firstSend := r.intentAtAdmission(c) && r.readyNow(ctx, c)
	adm, pause, done, err := k.gate.AdmitWith(ctx, job.ID, func(batch *pgx.Batch) {
		if firstSend {
			ledger.QueuePriorOutcomeAndIntent(batch, &pi, r.intent(c))
		} else {
			ledger.QueuePriorOutcomeForJob(batch, &c.prior, c.req.IdempotencyKey, job.ID, job.Args.Batch, job.Args.RecordID)
		}
		r.queueCacheLookup(batch, c)
		// Whatever the pipeline's mode is now: a line written under an
		// earlier one (a mode switched, a rolling deploy) holds the record
		// all the same.
		ledger.QueueOpenBatchLine(batch, &c.line, job.ID, job.Args.Batch)
		ledger.QueueBatchHold(batch, &hold, job.Args.Batch)
	})
	if err != nil {
		c.releaseSlot()
		return fmt.Errorf("admit and ledger look-up: %w", err)
	}
	c.done, c.adm = done, adm
	if firstSend {
		c.prior, c.intentID = pi.Prior, pi.AttemptID
	}
	b.Hold = facts.Hold(hold)
	if c.line.ID != 0 {
		batchPrior(&c.prior, c.line)
		// The line's answer is this request's answer; another one from the
		// cache would leave the line open.
		c.cached.Hit = false
		b.Line = facts.Line(c.line.Hold())
	}
	b.Admission = facts.Admission(adm)
	b.HoldRecheck = r.opts.BudgetRecheck
	if pause != nil {
		left := time.Until(pause.Until)
		b.Pause = &left
	}
	b.Prior = facts.Prior(c.prior)
	b.CacheHit = c.cached.Hit
	c.calls = c.prior.JobCalls
	return nil
}

// intentAtAdmission says whether admit may write the intent of a first
// send with the prior read: a synchronous pipeline's job on its own key
// that the response cache cannot answer. A job of a batch or auto
// pipeline writes its line's intent itself (workBatch); a cache hit must
// not spend a pace slot (readyNow); a capped or held batch's intent is
// ReserveAttempt's (the statement writes none there).
func (r *Runner) intentAtAdmission(c *call) bool {
	return !c.pipeline.UsesBatch() && c.key == c.jobKey && (c.cacheKey == "" || c.job.Args.NoCache)
}

// readyNow takes, without waiting, what the call needs after its
// admission: a concurrency slot and its pace. Only a run that has both
// writes its intent with the admission, so that between the intent and
// the request there is no wait, only the admission's answer: a process
// that dies in a wait for a slot or for the pace leaves no intent that was
// never sent (which the next run would count as a lost, possibly billed
// call). A run that must wait for either takes neither here; slot and
// paceStep wait, and reserve writes its intent after the waits. A pace
// slot taken by a run the admission then refuses is not given back, as
// for a call refused after its pace.
func (r *Runner) readyNow(ctx context.Context, c *call) bool {
	k := c.jobKey
	release, ok := k.limiter.TryAcquire()
	if !ok {
		return false
	}
	c.estTokens = c.req.EstimatedTokens()
	if err := k.pacer.Wait(ctx, c.estTokens, 0); err != nil {
		release()
		return false
	}
	c.release, c.paced = release, true
	return true
}

// withdrawIntent withdraws the first send's intent admit wrote, when the
// run ends without sending and no exit withdrew it in its own transaction:
// the exits that write nothing of their own (a park, a snooze, a breaker's
// refusal, a pace or a deadline that leaves no room, an error). It must
// land even when the run's context is ending: a leftover intent reads as a
// call that got no answer, possibly billed.
func (r *Runner) withdrawIntent(ctx context.Context, c *call) {
	if c.intentID == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := ledger.WithdrawIntent(ctx, r.pool, c.intentID); err != nil {
		r.log.ErrorContext(ctx, "withdraw an intent not sent", "job_id", c.job.ID, "attempt_id", c.intentID, "err", err)
		return
	}
	c.intentID = 0
}

// withdrawIntentTx is withdrawIntent inside tx, the transaction an exit
// writes anyway; the caller clears c.intentID once tx commits.
func withdrawIntentTx(ctx context.Context, tx pgx.Tx, c *call) error {
	if c.intentID == 0 {
		return nil
	}
	return ledger.WithdrawIntent(ctx, tx, c.intentID)
}

// intent is the ledger intent of the call c is about to make: the
// reservation reserve writes, or admit for a first send. A first send
// (no attempt under its idempotency key) is attempt 1 and no retry, as
// reserve would count it from the prior read.
func (r *Runner) intent(c *call) ledger.Intent {
	job, k, m := c.job, c.jobKey, c.jobModel
	return ledger.Intent{
		Batch: job.Args.Batch, RecordID: job.Args.RecordID, JobID: job.ID, Attempt: c.prior.JobCalls + 1,
		Key: k.cfg.Name, Model: m.Name, IdempotencyKey: c.req.IdempotencyKey, RequestHash: c.hash,
		IsRetry: c.retry, Change: changeLabel(c.change), EstCostUSD: estimateCost(m, c.req), InFlightFor: k.callMax + r.opts.JobMargin,
	}
}

// admitted decides on the admission and the ledger's answer: an open
// line sent by a key not worked here waits for its process; a lost call
// of a key whose policy is lookup is looked up first.
func (r *Runner) admitted(ctx context.Context, c *call, b *decide.BeforeCall) (decide.Reaction, error) {
	if c.line.ID != 0 && !r.lineSender(c) {
		// The key that sent the line is not worked here: another process
		// applies its answer.
		return decide.Reaction{Kind: decide.ReactPark, After: b.LineWait}, nil
	}
	if c.key != c.jobKey {
		// The line's answer is its sending key's: its outcome is not this
		// key's breaker's business.
		r.report(ctx, c, c.done, keys.OutcomeNone)
		c.done = noDone
	}
	rx := decide.Before(*b)
	if rx.Kind == decide.ReactLookup {
		r.lookupStored(ctx, c, b, c.prior.JobAmbiguous)
		rx = decide.Before(*b)
	}
	return rx, nil
}

// batch runs the batch side of a job whose pipeline uses provider batches
// or that holds an open line (workBatch); handled false: it goes on as a
// synchronous call on its own key.
func (r *Runner) batch(ctx context.Context, c *call, b decide.BeforeCall) (handled bool, err error) {
	if !c.pipeline.UsesBatch() && c.line.ID == 0 {
		return false, nil
	}
	// A synchronous pipeline's job holding a line (written under another
	// mode): the line's own intent is the one that counts.
	r.withdrawIntent(ctx, c)
	if handled, err := r.workBatch(ctx, c, b, c.prior, c.done); handled {
		return true, err
	}
	if c.key != c.jobKey {
		// The line taken back was another key's: the next run calls on
		// the job's own.
		return true, r.apply(ctx, c, decide.Reaction{Kind: decide.ReactPark, After: time.Millisecond}, keys.Report{})
	}
	return false, nil
}

// budget: a retry (a resend after a transient, ambiguous or unfinished
// attempt of this job; not after a throttle or an exhausted key, which
// cost no attempt either) draws on the key's fleet retry budget, and waits
// when it is spent.
func (r *Runner) budget(ctx context.Context, c *call, b *decide.BeforeCall) (decide.Reaction, error) {
	k := c.jobKey
	c.hadAmbiguous = c.prior.Ambiguous > 0
	c.retry = c.prior.JobLast.Retry()
	if c.retry && k.cfg.RetryBudget > 0 {
		var err error
		if b.OverRetryBudget, err = r.overRetryBudget(ctx, k); err != nil {
			return decide.Reaction{}, err
		}
		b.RetryDefer = decide.Jitter(r.opts.RetryDefer, 0.5, 1.5)
	}
	rx := decide.Before(*b)
	if rx.Kind != decide.ReactGo && b.OverRetryBudget {
		r.log.DebugContext(ctx, "retry deferred: fleet retry budget spent", "key", k.cfg.Name, "job_id", c.job.ID)
	}
	return rx, nil
}

// slot takes one of the key's concurrency slots in this process (given
// back when the run ends: releaseSlot), asking the breakers again after a
// wait for it, and checks the deadline the wait left.
func (r *Runner) slot(ctx context.Context, c *call, b *decide.BeforeCall) (decide.Reaction, error) {
	k := c.jobKey
	if c.release != nil {
		// Taken before the admission (readyNow).
		b.DeadlineNear = r.deadlineNear(ctx, k)
		return decide.Before(*b), nil
	}
	release, ok := k.limiter.TryAcquire()
	if !ok {
		var err error
		if release, err = k.limiter.Acquire(ctx); err != nil {
			return decide.Reaction{Kind: decide.ReactPark}, nil
		}
		// The key may have tripped, or been paused, while this job waited
		// for a slot: ask again before calling.
		if err := r.readmit(ctx, c, &c.done, b); err != nil {
			release()
			return decide.Reaction{}, err
		}
	}
	c.release = release
	// A long wait for a slot (the limit was lowered by throttling) must not
	// eat into the call's own timeout: River's deadline for this run would
	// cut the call mid-flight and make it ambiguous.
	b.DeadlineNear = r.deadlineNear(ctx, k)
	return decide.Before(*b), nil
}

// releaseSlot gives back the concurrency slot the run took, if it took one.
func (c *call) releaseSlot() {
	if c.release != nil {
		c.release()
	}
}

// paceStep waits for this process's share of the key's rate
// (pacing.go), asking the breakers again and checking the deadline
// after a long wait; a key the safety net held meanwhile parks the job.
func (r *Runner) paceStep(ctx context.Context, c *call, b *decide.BeforeCall) (decide.Reaction, error) {
	k := c.jobKey
	paceStart := time.Now()
	if !c.paced { // else taken before the admission, with no wait (readyNow)
		c.estTokens = c.req.EstimatedTokens()
		if d, err := r.pace(ctx, k, c.estTokens); err != nil {
			return decide.Reaction{Kind: decide.ReactPark, After: d}, nil
		}
	}
	if !c.paced && time.Since(paceStart) >= readmitAfterPace {
		// The same after a wait for the pace: the key may have tripped or
		// been paused meanwhile, and the wait used some of the deadline.
		if err := r.readmit(ctx, c, &c.done, b); err != nil {
			return decide.Reaction{}, err
		}
		b.DeadlineNear = r.deadlineNear(ctx, k)
		if rx := decide.Before(*b); rx.Kind != decide.ReactGo {
			return rx, nil
		}
	}
	if !c.adm.Probe && k.watch.HeldSince(c.adm.Generation) {
		// The safety net held the key while this job waited for its pace.
		return decide.Reaction{Kind: decide.ReactPark, After: k.cfg.ProbeInterval}, nil
	}
	return decide.Reaction{Kind: decide.ReactGo}, nil
}

// reserve writes the call's intent row, which is also its reservation
// against the batch's spend cap; a batch held by hand, or at its cap,
// gets no call. A first send's intent was written already, with the
// prior read in admit's round trip: the call takes it, with no round trip
// here.
func (r *Runner) reserve(ctx context.Context, c *call, b *decide.BeforeCall) (decide.Reaction, error) {
	job, k := c.job, c.jobKey
	if c.intentID != 0 {
		// Written with the prior read (admit): the call takes it.
		c.attemptID, c.intentID = c.intentID, 0
		c.calls++
		return decide.Reaction{Kind: decide.ReactGo}, nil
	}
	var err error
	c.attemptID, err = ledger.ReserveAttempt(ctx, r.pool, r.intent(c))
	var budgetErr *ledger.BudgetError
	var held *ledger.HeldError
	if errors.As(err, &held) {
		// Paused or cancelled since the look-up: no call.
		b.Hold = facts.Hold(held.State)
		return decide.Before(*b), nil
	}
	if errors.As(err, &budgetErr) {
		b.OverBudget = true
		if budgetErr.Wait {
			// Worst-case reservations of calls in flight fill the cap; most
			// of them will not be spent. Try again shortly.
			b.BudgetRecheck = decide.Jitter(r.opts.BudgetRecheck, 0.1, 0.2)
		} else {
			b.BudgetRecheck = r.opts.BudgetRecheck
			if budgetErr.Paused {
				r.alerter.Alert(ctx, keys.Alert{Kind: keys.AlertBudgetReached, Key: k.cfg.Name, Batch: job.Args.Batch,
					Message: "batch spend cap reached: its jobs stay queued; raise it with `triage batch budget`",
					Fields:  map[string]any{"budget_usd": budgetErr.BudgetUSD, "spent_usd": budgetErr.SpentUSD, "in_flight_usd": budgetErr.ReservedUSD}})
			}
		}
		return decide.Before(*b), nil
	}
	if err != nil {
		return decide.Reaction{}, fmt.Errorf("ledger intent: %w", err)
	}
	c.calls++
	return decide.Reaction{Kind: decide.ReactGo}, nil
}

// send makes the call (the one place that sends) and returns what the
// decision after it will know so far.
func (r *Runner) send(ctx context.Context, c *call) (decide.AfterCall, error) {
	p, m, k := c.pipeline, c.jobModel, c.jobKey
	a := decide.AfterCall{
		JobCalls: c.prior.JobCalls, MaxAttempts: p.MaxAttempts,
		JobAmbiguous: c.prior.JobAmbiguous, AmbiguousRetries: p.AmbiguousRetries, Policy: k.cfg.Ambiguous,
		NoRetries: k.cfg.RetryBudget == 0, RetryBudget: k.cfg.RetryBudget,
		Backoff: decide.Backoff(c.prior.JobCalls+1, r.opts.BackoffBase, r.opts.BackoffCap), BackoffCap: r.opts.BackoffCap,
		ProbeInterval: k.cfg.ProbeInterval,
	}
	if len(p.Fallback) > 0 {
		a.Fallback.Model = decide.FirstCapable(r.cfg, p, m.Name, need(c.req))
	}
	c.called = true
	var err error
	if c.req.Background {
		c.res, err = r.sendBackground(ctx, c)
	} else {
		c.res, err = k.client.Do(ctx, c.req)
	}
	a.Cancelled, a.Phase = ctx.Err() != nil, c.res.Observation.Phase
	if err != nil {
		// A request the client refuses to build: configuration, not the provider.
		a.ClientErr = err.Error()
	}
	return a, err
}

// classify turns the call's result into a verdict and the facts the
// decision after the call needs: the output checked against the
// pipeline's contract, a cut stream's partial text, a rejection's changed
// retry, a throttle's scope.
func (r *Runner) classify(ctx context.Context, c *call, a *decide.AfterCall, sendErr error) {
	p, k := c.pipeline, c.jobKey
	switch {
	case sendErr != nil:
	case a.Stopped():
		// This run was stopped (shutdown, River's timeout) before an answer
		// arrived. An answer that did arrive is used, whatever the context
		// says: it was paid for.
		c.verdict = classify.Verdict{Class: classify.Ambiguous, Reason: ledger.ReasonWorkerStopped, Known: true}
		c.keepPartial()
	default:
		c.res, c.verdict = k.observe(c.res, r.cfg.Classifier())
		a.Verdict = c.verdict
		a.PartialChars, a.AcceptPartialMinChars = c.keepPartial(), p.AcceptPartialMinChars
		r.observe(ctx, c)
		if c.verdict.Class == classify.OK {
			var bad string
			c.output, bad = usableOutput(c)
			a.Unusable, a.Malformed = bad, c.res.Malformed != ""
		}
		r.observePace(k, c, c.estTokens)
		if c.verdict.Class == classify.Rejected {
			a.Change = c.overflowFacts(c.res.Observation)
		}
		if c.verdict.Class == classify.Throttled {
			// keys.ThrottleScopeFor decides whether only this job waits or
			// the whole key (pacing.go).
			a.Throttle, a.KeyWide = r.throttleScope(c)
		}
	}
}

// render builds the request from the record and the pipeline, and its
// idempotency key; a record the pipeline cannot render is dead-lettered.
func (c *call) render() decide.Reaction {
	var record map[string]any
	if err := json.Unmarshal(c.job.Args.Record, &record); err != nil {
		return decide.DeadLetter(classify.Rejected, decide.ReasonConfig, "record is not a JSON object")
	}
	p, m := c.pipeline, c.model
	c.change = jobChange(c.job.Metadata)
	c.change.Apply(record)
	prompt, err := p.Render(record)
	if err != nil {
		return decide.DeadLetter(classify.Rejected, decide.ReasonTemplate, err.Error())
	}
	c.req = provider.Request{
		Model: m.Name, System: p.System, Prompt: prompt, MaxTokens: p.MaxTokens,
		Temperature: p.Temperature, JSON: p.WantsJSON() && !c.change.DropJSON, RecordID: c.job.Args.RecordID,
	}
	if c.req.JSON && p.Output == config.OutputJSONSchema {
		c.req.Schema, c.req.SchemaName, c.req.SchemaStrict = p.Schema, p.SchemaName(), p.Strict()
	}
	c.hash = provider.RequestHash(c.req)
	c.req.IdempotencyKey = provider.IdempotencyKey(c.job.Args.Batch, c.job.Args.RecordID, p.Name, c.hash)
	c.setCacheKey()
	// How the answer is carried is not part of the request's identity: a
	// streamed and a plain call for the same prompt are the same request.
	c.req.Stream, c.req.IdleTimeout, c.req.StreamMax = p.Stream, p.StreamIdleTimeout, p.StreamMax
	// A key that looks lost calls up keeps its calls at the provider,
	// tagged with the idempotency key.
	c.req.Store = c.key != nil && c.key.cfg.Ambiguous == config.AmbiguousLookup
	// A background key creates its non-streamed calls in background mode.
	c.req.Background = c.key != nil && c.key.cfg.Background && !c.req.Stream
	return decide.Reaction{Kind: decide.ReactGo}
}

// readmitAfterPace: a pacing wait at least this long is followed by a
// second admission before the call (Runner.readmit). Shorter waits are the
// spacing of calls a few milliseconds apart, which the calls already in
// flight cover.
const readmitAfterPace = 10 * time.Millisecond

// readmit asks the key's breakers and pause again after a wait (for a
// concurrency slot, for the pace): the key may have tripped, or been
// paused, while the job waited, and a call admitted before the wait must
// not go out into an open breaker. The first admission is reported as
// unused; *done becomes the new one's. A run that holds the probe claim
// keeps it: it is the call the breaker waits for.
func (r *Runner) readmit(ctx context.Context, c *call, done *keys.Done, b *decide.BeforeCall) error {
	if c.adm.Probe {
		return nil
	}
	adm, pause, done2, err := c.key.gate.Admit(ctx, c.job.ID)
	if err != nil {
		return fmt.Errorf("admit: %w", err)
	}
	r.report(ctx, c, *done, keys.OutcomeNone)
	*done, c.adm, b.Admission, b.Pause = done2, adm, facts.Admission(adm), nil
	if pause != nil {
		left := time.Until(pause.Until)
		b.Pause = &left
	}
	return nil
}

// callRoom is how much of its run's deadline a call needs when it starts:
// the key's longest call (callMax), and a quarter of the job margin for the ledger
// writes after it. River's deadline for a run is the timeout plus the whole
// margin (jobWorker.Timeout).
func (r *Runner) callRoom(k *Key) time.Duration {
	return k.callMax + r.opts.JobMargin/4
}

// spareTime is how long a run may still wait before its call (for a slot,
// for the pace) and leave the call its room; ok false: the run has no
// deadline.
func (r *Runner) spareTime(ctx context.Context, k *Key) (spare time.Duration, ok bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return time.Until(dl) - r.callRoom(k), true
}

// deadlineNear is the one definition of "too little of the run's deadline
// is left for its call": a call started then would be cut by River's
// deadline after it was sent (worker_stopped, ambiguous, and billed again
// by the retry). The run parks instead and comes back with a fresh
// deadline.
func (r *Runner) deadlineNear(ctx context.Context, k *Key) bool {
	spare, ok := r.spareTime(ctx, k)
	return ok && spare < 0
}

// report tells the breakers what the call came to (once: later calls of
// done do nothing). A failure to record it is logged, not returned: the
// call's own outcome still has to be stored. Every report of a run passes
// here, so keys.Heard holds for all of them: a run that made no call (a
// stored batch answer, a cache hit, a prior outcome) gives a probe claim
// back instead of settling it.
func (r *Runner) report(ctx context.Context, c *call, done keys.Done, o keys.Outcome) keys.Report {
	rep, err := done(ctx, keys.Heard(c.adm, o, c.called), c.verdict.Reason)
	if err != nil {
		r.log.ErrorContext(ctx, "breaker report", "key", c.key.cfg.Name, "job_id", c.job.ID, "err", err)
	}
	return rep
}

// observe logs the call and tells the Observer and, for an error no rule
// knows, the alerter.
func (r *Runner) observe(ctx context.Context, c *call) {
	k, job := c.key, c.job
	if r.log.Enabled(ctx, slog.LevelDebug) {
		// Guarded: the arguments (a slice and boxed values) are built on
		// every call, even with the level off.
		r.log.DebugContext(ctx, "call", "key", k.cfg.Name, "job_id", job.ID, "batch", job.Args.Batch, "record_id", job.Args.RecordID,
			"status", c.res.Observation.Status, "phase", c.res.Observation.Phase, "class", c.verdict.Class.String(), "reason", c.verdict.Reason)
	}
	if c.verdict.NeedsRule() {
		// An error no vendor rule knows: a default fired, or the signal
		// layer or the status alone decided. Once per key, status and code
		// an hour, fleet-wide: a flood of one unknown error is one alert,
		// not one per call.
		kind := fmt.Sprintf("unknown_error:%d:%s:%s", c.res.Observation.Status, deref(c.verdict.Code), r.now().UTC().Format("2006-01-02T15"))
		r.alertOnce(ctx, k.cfg.Name, kind, keys.Alert{Kind: keys.AlertUnknownError, Key: k.cfg.Name, Batch: job.Args.Batch,
			Message: "an error no vendor rule knows (decided by " + decidedBy(c.verdict) + "): check the dead letters and consider a [[rules]] entry",
			Fields: map[string]any{"status": c.res.Observation.Status, "code": deref(c.verdict.Code), "class": c.verdict.Class.String(),
				"reason": c.verdict.Reason, "decided_by": decidedBy(c.verdict)}})
	}
	if o := r.opts.Observer; o != nil {
		spent := cost(c.model, c.res.InputTokens, c.res.OutputTokens)
		if c.lineID != 0 {
			spent, _ = lineCost(c.model, c.res.InputTokens, c.res.OutputTokens)
		}
		o.ObserveCall(CallEvent{Key: k.cfg.Name, Batch: job.Args.Batch, Class: c.verdict.Class, Status: c.res.Observation.Status,
			Known: c.verdict.Known, Retry: c.retry, CostUSD: spent, Elapsed: c.res.Elapsed})
	}
}

// apply carries a reaction out: the ledger, the key's queue and pause, the
// alerts, and River's return value. It is the only place that acts on a
// decision; rep is what the breakers did with the call's outcome.
func (r *Runner) apply(ctx context.Context, c *call, rx decide.Reaction, rep keys.Report) error {
	k, job := c.key, c.job
	if k != nil {
		r.applyReport(ctx, c, rep)
	}
	switch rx.Kind {
	case decide.ReactComplete:
		if err := r.complete(ctx, c); err != nil {
			return err
		}
		if c.attemptID != 0 {
			k.limiter.OnSuccess()
		}
		return nil
	case decide.ReactCompletePartial:
		return r.completePartial(ctx, c)
	case decide.ReactDeadLetter:
		if c.line.ID != 0 && c.lineID == 0 && c.line.Hold() == ledger.HoldUnsent {
			// A line not in a provider batch (a cancelled batch's, one past
			// the job's max age): closed and its attempt settled as not run
			// ($0) before the dead letter (the open-line rule).
			took, err := ledger.TakeBackBatchLine(ctx, r.pool, c.line.ID, c.line.AttemptID)
			if err != nil {
				return err
			}
			if !took {
				// The submitter sent it first: its answer is on its way.
				return park(ctx, job, r.batchWait())
			}
		}
		return r.deadLetter(ctx, c, rx)
	case decide.ReactFallback:
		return r.applyFallback(ctx, c, rx)
	case decide.ReactCancel:
		// An earlier run wrote the dead letter and died before its cancel
		// landed: never call again.
		return river.JobCancel(errors.New("record already dead-lettered"))
	case decide.ReactCacheHit:
		c.fromCache = true
		return r.complete(ctx, c)
	case decide.ReactCompleteFound:
		return r.completeFound(ctx, c)
	case decide.ReactRetryChanged:
		return r.retryChanged(ctx, c, rx)
	}
	_ = r.finish(ctx, c, facts.AttemptStatus(rx.Outcome))
	switch rx.Kind {
	case decide.ReactSnooze:
		return river.JobSnooze(rx.After)
	case decide.ReactPauseKey:
		if _, err := r.store.PauseFor(ctx, k.cfg.Name, keys.PauseThrottled, rx.After); err != nil {
			return fmt.Errorf("pause key: %w", err)
		}
		_ = r.opts.Reconcile(ctx, k.cfg.Name)
		r.log.InfoContext(ctx, "key throttled", "key", k.cfg.Name, "scope", "key", "wait", rx.After.String(),
			"pace_per_s", k.pacer.State().FleetRate, "code", deref(c.verdict.Code))
		return river.JobSnooze(rx.After)
	default: // Retry, Park, Trip, Storm: none is the job's own doing
		return park(ctx, job, rx.After)
	}
}

// applyReport acts on what the breakers did: the queue follows at once in
// this process (the others' Supervisors follow within a tick), and the
// alerts of the transitions fire from the one call that made them.
func (r *Runner) applyReport(ctx context.Context, c *call, rep keys.Report) {
	k, job := c.key, c.job
	if rep.Changed {
		_ = r.opts.Reconcile(context.WithoutCancel(ctx), k.cfg.Name)
	}
	if rep.Tripped {
		msg := "key exhausted: its jobs stay queued; one probe every probe_interval until it works again"
		if keys.InvalidKey(c.verdict.Reason) {
			msg = "key invalid: the provider refuses the API key itself (" + c.verdict.Reason + ": wrong or revoked), not for money; " +
				"a top-up will not help. Fix " + k.cfg.APIKeyEnv + ", then `triage keys resume " + k.cfg.Name + "`; its jobs stay queued meanwhile"
		}
		r.alerter.Alert(ctx, keys.Alert{Kind: keys.AlertKeyExhausted, Key: k.cfg.Name, Batch: job.Args.Batch,
			Message: msg,
			Fields: map[string]any{"status": c.res.Observation.Status, "code": deref(c.verdict.Code), "reason": c.verdict.Reason,
				"probe_interval": k.cfg.ProbeInterval.String()}})
	}
	if rep.Resumed {
		r.alerter.Alert(ctx, keys.Alert{Kind: keys.AlertKeyResumed, Key: k.cfg.Name, Batch: job.Args.Batch,
			Message: "probe succeeded: key resumed, its queue drains again"})
	}
	if rep.Storm.Opened {
		r.log.WarnContext(ctx, "storm breaker opened: the key's queue is paused until a probe succeeds", "key", k.cfg.Name,
			"status", c.res.Observation.Status, "code", deref(c.verdict.Code), "cooldown", rep.Storm.Wait.String())
	}
	if rep.Storm.Closed || rep.Resumed {
		// Jobs parked by the breaker wake now, not when their snoozes end:
		// the queue drains at once.
		n, err := jobs.WakeKey(context.WithoutCancel(ctx), r.pool, r.opts.Schema, k.cfg.Name)
		if err != nil {
			r.log.WarnContext(ctx, "wake parked jobs", "key", k.cfg.Name, "err", err)
		}
		if rep.Storm.Closed {
			r.log.InfoContext(ctx, "storm breaker closed: probe succeeded, the key's queue drains again", "key", k.cfg.Name, "woken", n)
		}
	}
}

// completeOnce stores the result, finishes the attempt, resolves earlier
// ambiguous sends under the same idempotency key and completes the job, all
// in one transaction: "completed" means "result stored".
func (r *Runner) completeOnce(ctx context.Context, c *call) error {
	// A paid-for answer is stored even if the run is being stopped.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	// The transaction begins in the round trip of the answer's ledger
	// writes: a synchronous call's answer is one statement
	// (ledger.QueueSettleAnswer), with the end of the key's safety-net
	// runs its success brings (watchDecide); then River's completion and
	// the commit.
	settled := !c.found && c.attemptID != 0 && c.lineID == 0 && c.intentID == 0
	if groupable(c, settled) {
		return r.completeInGroup(ctx, c)
	}
	var b pgx.Batch
	b.BeginTx(pgx.TxOptions{})
	if settled {
		if err := ledger.QueueSettleAnswer(&b, r.answer(c)); err != nil {
			return fmt.Errorf("complete: %w", err)
		}
	}
	if c.watchReset {
		ledger.QueueResetWatchRun(&b, c.key.cfg.Name, c.watchAnsweredAt)
	}
	br := r.pool.SendBatch(ctx, &b)
	tx := br.Tx()
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	if err := br.Close(); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if err := r.completeWrites(ctx, tx, c, settled); err != nil {
		return err
	}
	// The earlier sends that created the background response this run
	// polled to its end: one response, billed once, found by its id.
	if c.resumed && c.attemptID != 0 {
		if _, err := ledger.SettleResumedResponse(ctx, tx, c.req.IdempotencyKey, c.res.ResponseID, c.attemptID); err != nil {
			return fmt.Errorf("complete: settle resumed response: %w", err)
		}
	}
	if err := closeLine(ctx, tx, c); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, c.job); err != nil {
		return fmt.Errorf("complete: job: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("complete: commit: %w", err)
	}
	c.intentID, c.watchReset = 0, false
	return nil
}

// answer is what QueueSettleAnswer writes for c's synchronous answer.
func (r *Runner) answer(c *call) ledger.Answer {
	return ledger.Answer{
		AttemptID: c.attemptID, Outcome: r.outcome(c, c.completedStatus()),
		Batch: c.job.Args.Batch, RecordID: c.job.Args.RecordID, Output: c.output,
		Cache: ledger.CacheEntry{Key: c.storeCacheKey(), TTL: c.pipeline.CacheTTL, Now: r.pinnedNow()},
		// Earlier sends that got no answer are settled as billed once
		// only where the endpoint is known to replay a repeated
		// Idempotency-Key.
		Resolve:        c.hadAmbiguous && c.key.cfg.IdempotentReplay && !c.partialAccepted,
		IdempotencyKey: c.req.IdempotencyKey,
	}
}

// completeWrites is the ledger side of completeOnce for what
// QueueSettleAnswer does not cover (settled false): a look-up's stored
// answer, a batch line's answer, a cache hit, an intent to withdraw.
func (r *Runner) completeWrites(ctx context.Context, tx pgx.Tx, c *call, settled bool) error {
	if settled {
		return nil
	}
	if err := withdrawIntentTx(ctx, tx, c); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if c.found {
		if err := r.settleFound(ctx, tx, c); err != nil {
			return fmt.Errorf("complete: found by look-up: %w", err)
		}
	} else if c.attemptID != 0 {
		// A batch line's attempt may be finished already: a paid answer
		// whose job was cancelled by hand, settled by the submitter and
		// applied by the record's requeued job (ledger.AdoptBatchLine). It
		// is counted once.
		err := ledger.FinishAttempt(ctx, tx, c.attemptID, r.outcome(c, c.completedStatus()))
		if err != nil && (c.lineID == 0 || !errors.Is(err, ledger.ErrAttemptFinished)) {
			return fmt.Errorf("complete: finish attempt: %w", err)
		}
		if err := r.storeResult(ctx, tx, c); err != nil {
			return fmt.Errorf("complete: store result: %w", err)
		}
		// Earlier sends that got no answer are settled as billed once only
		// where the endpoint is known to replay a repeated Idempotency-Key.
		if c.hadAmbiguous && c.key.cfg.IdempotentReplay && !c.partialAccepted {
			if _, err := ledger.ResolvePossiblyBilled(ctx, tx, c.req.IdempotencyKey); err != nil {
				return fmt.Errorf("complete: resolve: %w", err)
			}
		}
	} else if c.fromCache {
		if err := r.storeCacheHit(ctx, tx, c); err != nil {
			return fmt.Errorf("complete: cache hit: %w", err)
		}
	}
	return nil
}

// finish records the attempt's outcome (none when no call was made).
func (r *Runner) finish(ctx context.Context, c *call, status ledger.AttemptStatus) error {
	if c.attemptID == 0 || status == "" {
		return nil
	}
	// The outcome must land even when the job's context is ending: a missing
	// outcome would later read as an ambiguous (possibly billed) call.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if c.lineID != 0 {
		return r.finishLine(ctx, c, status)
	}
	err := ledger.FinishAttempt(ctx, r.pool, c.attemptID, r.outcome(c, status))
	if err != nil && !errors.Is(err, ledger.ErrAttemptFinished) {
		r.log.ErrorContext(ctx, "ledger outcome", "attempt_id", c.attemptID, "err", err)
		return err
	}
	return nil
}

func (r *Runner) outcome(c *call, status ledger.AttemptStatus) ledger.Outcome {
	o := ledger.Outcome{
		Status: status, Class: c.verdict.Class, HTTPStatus: c.res.Observation.Status,
		VendorCode: deref(c.verdict.Code), Reason: c.verdict.Reason,
		InputTokens: c.res.InputTokens, OutputTokens: c.res.OutputTokens,
		CostUSD: cost(c.model, c.res.InputTokens, c.res.OutputTokens),
		Partial: c.partial,
	}
	if c.lineID != 0 {
		var sync float64
		o.CostUSD, sync = lineCost(c.model, c.res.InputTokens, c.res.OutputTokens)
		o.SyncCostUSD = &sync
	}
	return o
}

// deadLetter records the call's outcome and the record's dead letter in one
// transaction, then cancels the job, so it is never resent as is: once the
// outcome is durable the dead letter is too, and a run that finds the dead
// letter (Prior.DeadLettered) does not call again. A dead letter that already
// exists for the record (a crash after writing it) is reused.
func (r *Runner) deadLetter(ctx context.Context, c *call, rx decide.Reaction) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	job := c.job
	row := ledger.DeadLetterRow{
		Batch: job.Args.Batch, RecordID: job.Args.RecordID, JobID: job.ID, Pipeline: job.Args.Pipeline,
		Class: rx.Class, Reason: rx.Reason, HTTPStatus: c.res.Observation.Status, VendorCode: deref(c.verdict.Code),
		Attempts: job.Attempt, Rule: c.verdict.Rule, Unknown: c.verdict.Rule != "" && !c.verdict.Known,
		Suspect: decide.Suspect(c.verdict, rx.Reason, keys.HoldRejectionStreak, keys.HoldThrottleWall),
	}
	if c.calls != 0 {
		row.Attempts = c.calls
	}
	if c.key != nil {
		row.Key = c.key.cfg.Name
	}
	if c.req.Model != "" {
		row.Request, _ = json.Marshal(requestViewOf(c))
	} else {
		row.Request = job.Args.Record
	}
	row.ErrorExcerpt = c.res.Observation.Body
	if rx.Detail != "" {
		if row.ErrorExcerpt != "" {
			row.ErrorExcerpt = rx.Detail + "\n" + row.ErrorExcerpt
		} else {
			row.ErrorExcerpt = rx.Detail
		}
	}
	if c.key != nil && c.key.apiKey != "" {
		// The provider's text passed observe already; the detail may quote
		// the request, so it passes the key's boundary too.
		row.ErrorExcerpt = c.key.redact.Excerpt(row.ErrorExcerpt)
	}
	var (
		id        int64
		hasResult bool
		err       error
	)
	// A failed write is tried again here rather than by River: a River retry
	// would find only this call's intent and send the request again.
	for try := range deadLetterTries {
		if try > 0 {
			time.Sleep(time.Duration(try) * 100 * time.Millisecond)
		}
		err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
			if err := withdrawIntentTx(ctx, tx, c); err != nil {
				return err
			}
			if c.attemptID != 0 && rx.Outcome != decide.OutcomeNone {
				if err := ledger.FinishAttempt(ctx, tx, c.attemptID, r.outcome(c, facts.AttemptStatus(rx.Outcome))); err != nil && !errors.Is(err, ledger.ErrAttemptFinished) {
					return err
				}
			}
			if err := closeLine(ctx, tx, c); err != nil {
				return err
			}
			var err error
			id, err = ledger.AddDeadLetter(ctx, tx, row)
			if errors.Is(err, ledger.ErrHasResult) {
				// Another run of the record stored its result: the
				// record is done, this call's outcome is kept, and
				// nothing is dead-lettered.
				hasResult, err = true, nil
			}
			return err
		})
		if err == nil || ctx.Err() != nil {
			break
		}
		r.log.WarnContext(ctx, "dead letter write failed, trying again", "batch", job.Args.Batch, "record_id", job.Args.RecordID, "err", err)
	}
	if err != nil {
		return fmt.Errorf("dead letter: %w", err)
	}
	c.intentID = 0
	if hasResult {
		r.log.InfoContext(ctx, "not dead-lettered: the record already has a result", "batch", job.Args.Batch,
			"record_id", job.Args.RecordID, "class", rx.Class.String(), "reason", rx.Reason)
		return nil
	}
	r.log.WarnContext(ctx, "dead letter", "dead_letter_id", id, "batch", job.Args.Batch, "record_id", job.Args.RecordID,
		"class", rx.Class.String(), "reason", rx.Reason, "status", c.res.Observation.Status, "code", deref(c.verdict.Code))
	return river.JobCancel(&CallError{Class: c.verdict.Class, Status: c.res.Observation.Status, Code: deref(c.verdict.Code), Reason: rx.Reason})
}

// deadLetterTries is how often the dead-letter transaction is tried
// before the run gives up with an error.
const deadLetterTries = 3

// requestView is the rendered request as kept in a dead letter: everything
// needed to understand or replay it, never the API key.
func requestView(r provider.Request) map[string]any {
	v := map[string]any{"model": r.Model, "prompt": r.Prompt, "max_tokens": r.MaxTokens, "json": r.JSON, "idempotency_key": r.IdempotencyKey}
	if r.System != "" {
		v["system"] = r.System
	}
	if r.Schema != nil {
		v["json_schema"] = r.SchemaName
	}
	if r.Temperature != nil {
		v["temperature"] = *r.Temperature
	}
	return v
}

// requestViewOf is requestView with the job's change named, if any.
func requestViewOf(c *call) map[string]any {
	v := requestView(c.req)
	if l := changeLabel(c.change); l != "" {
		v["change"] = l
	}
	return v
}

// usableOutput checks the answer against the pipeline's output contract.
func usableOutput(c *call) (json.RawMessage, string) {
	if c.res.Malformed != "" {
		return nil, "the 2xx body is not the vendor's wire format: " + c.res.Malformed
	}
	if c.pipeline.WantsJSON() {
		text := stripFence(c.res.Content)
		if !gjson.Valid(text) || !gjson.Parse(text).IsObject() {
			return nil, "the answer is not a JSON object"
		}
		if bad := c.pipeline.CheckSchema([]byte(text)); bad != "" {
			return nil, "the answer does not follow " + c.pipeline.SchemaSource() + ": " + bad
		}
		return json.RawMessage(text), ""
	}
	b, _ := json.Marshal(c.res.Content)
	return b, ""
}

// CallError is what a failed call returns to River: status and vendor code
// only, never the body.
type CallError struct {
	Class  classify.Class
	Status int
	Code   string
	Reason string
}

func (e *CallError) Error() string {
	s := fmt.Sprintf("%s call: %s", e.Class, e.Reason)
	if e.Status != 0 {
		s += fmt.Sprintf(" (status %d", e.Status)
		if e.Code != "" {
			s += ", code " + e.Code
		}
		s += ")"
	}
	return s
}

// metaParked counts the snoozes that were the fleet's doing, not the job's:
// an open breaker, a key paused by another job's throttle, a batch at its
// spend cap, a deferred retry. They do not count against max_snoozes, so a
// night of exhaustion does not dead-letter jobs that were never tried.
const metaParked = "triage_parked"

// ownSnoozes is River's snooze count less the parked ones.
func ownSnoozes(job *river.Job[jobargs.Args]) int {
	return int(gjson.GetBytes(job.Metadata, "snoozes").Int() - gjson.GetBytes(job.Metadata, metaParked).Int())
}

// park snoozes the job without charging it a snooze.
func park(ctx context.Context, job *river.Job[jobargs.Args], d time.Duration) error {
	_ = river.MetadataSet(ctx, metaParked, gjson.GetBytes(job.Metadata, metaParked).Int()+1)
	return river.JobSnooze(d)
}

// overRetryBudget reports whether the key's fleet retry budget is spent
// (decide.RetryBudget), from the ledger's count over the worker's window.
func (r *Runner) overRetryBudget(ctx context.Context, k *Key) (bool, error) {
	rb := r.opts.RetryBudget
	u, err := ledger.RetryUsageByKey(ctx, r.pool, k.cfg.Name, rb.Since(r.now()))
	if err != nil {
		return false, fmt.Errorf("retry budget: %w", err)
	}
	return rb.Spent(k.cfg.RetryBudget, u.FirstCalls, u.OpenRetries), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// now is this host's time: Config.HostClock, else Config.Clock, else
// the system clock.
func (r *Runner) now() time.Time {
	if c := r.hostClock(); c != nil {
		return c.Now()
	}
	return time.Now()
}

// hostClock is Config.HostClock, else Config.Clock; nil: the system
// clock.
func (r *Runner) hostClock() keys.Clock {
	if r.opts.HostClock != nil {
		return r.opts.HostClock
	}
	return r.opts.Clock
}

// decidedBy names the classifier layer that decided v, "default" when no
// layer knew it.
func decidedBy(v classify.Verdict) string {
	if !v.Known || v.DecidedBy == "" {
		return "default"
	}
	return v.DecidedBy
}
