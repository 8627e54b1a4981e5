package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/tidwall/gjson"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/provider"
)

// Dead-letter reasons the worker itself decides (the classifier's reasons
// are used for rejected calls).
const (
	ReasonRetriesExhausted   = "retries_exhausted"
	ReasonAmbiguousExhausted = "ambiguous_retries_exhausted"
	ReasonSnoozedOut         = "snoozed_out"
	ReasonInvalidOutput      = "invalid_output"
	ReasonConfig             = "config_error"
)

// callWorker is the River worker for Args.
type callWorker struct {
	river.WorkerDefaults[Args]
	rt *Runtime
}

// Timeout bounds one run of a job: the key's call timeout plus time for the
// ledger writes around it.
func (w *callWorker) Timeout(job *river.Job[Args]) time.Duration {
	if _, _, k, err := w.rt.lookup(job.Args.Pipeline); err == nil {
		return k.cfg.Timeout + w.rt.opts.JobMargin
	}
	return 0
}

// NextRetry is jittered exponential backoff, but never sooner than a
// retry-after hint the failed call carried (River does not pass the error to
// NextRetry, so Work leaves the hint here for it).
func (w *callWorker) NextRetry(job *river.Job[Args]) time.Time {
	d := backoff(job.Attempt, w.rt.opts.BackoffBase, w.rt.opts.BackoffCap)
	if v, ok := w.rt.retryAfter.LoadAndDelete(job.ID); ok {
		d = max(d, v.(time.Duration))
	}
	return time.Now().Add(d)
}

// backoff is base·2^(attempt-1) capped, with "equal jitter": half fixed, half
// random, so retries spread out but never collapse to zero.
func backoff(attempt int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	half := d / 2
	return half + rand.N(half+1)
}

func (r *Runtime) lookup(pipeline string) (*config.Pipeline, *config.Model, *keyRuntime, error) {
	p, err := r.cfg.Pipeline(pipeline)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := r.cfg.Model(p.Model)
	if err != nil {
		return nil, nil, nil, err
	}
	k := r.keys[m.Key]
	if k == nil {
		return nil, nil, nil, fmt.Errorf("key %q is not worked by this process", m.Key)
	}
	return p, m, k, nil
}

// call carries what one run of a job knows, for the reactions.
type call struct {
	job       *river.Job[Args]
	pipeline  *config.Pipeline
	model     *config.Model
	key       *keyRuntime
	req       provider.Request
	adm       keys.Admission
	attemptID int64
	res       provider.Result
	verdict   classify.Verdict
	// probeReported: the probe's outcome went to the breaker (ProbeResult,
	// ReleaseProbe or Trip).
	probeReported bool
}

func (w *callWorker) Work(ctx context.Context, job *river.Job[Args]) error {
	rt := w.rt
	p, m, k, err := rt.lookup(job.Args.Pipeline)
	if err != nil {
		return rt.deadLetter(ctx, &call{job: job}, "rejected", ReasonConfig, err.Error())
	}
	c := &call{job: job, pipeline: p, model: m, key: k}

	// River allows a few attempts more than the pipeline so that a job whose
	// runs failed for the worker's own reasons (database errors, a crash, a
	// panic) ends here, in the dead letters, instead of being discarded by
	// River with its record in neither the results nor the dead letters.
	if job.Attempt > p.MaxAttempts {
		return rt.deadLetter(ctx, c, "transient", ReasonRetriesExhausted,
			fmt.Sprintf("attempt %d with max_attempts %d: earlier runs ended in worker or database errors", job.Attempt, p.MaxAttempts))
	}
	if age := time.Since(job.CreatedAt); age > rt.opts.MaxAge {
		return rt.deadLetter(ctx, c, "throttled", ReasonSnoozedOut,
			fmt.Sprintf("queued for %s, longer than the %s limit", age.Round(time.Minute), rt.opts.MaxAge))
	}
	if n := ownSnoozes(job); n >= p.MaxSnoozes {
		return rt.deadLetter(ctx, c, "throttled", ReasonSnoozedOut,
			fmt.Sprintf("snoozed %d times by its own throttling (pipeline max_snoozes %d)", n, p.MaxSnoozes))
	}

	// The breaker first: a key known to be exhausted gets no call at all.
	// One statement reads both the breaker and the pause.
	var pause *keys.Pause
	c.adm, pause, err = rt.store.AdmitCall(ctx, k.cfg.Name, job.ID)
	if err != nil {
		return fmt.Errorf("admit: %w", err)
	}
	if !c.adm.Allowed {
		return park(ctx, job, max(c.adm.Wait, time.Second))
	}
	if c.adm.Probe {
		// Whatever this run ends in, the probe claim is given back unless its
		// outcome was reported: a claim kept by a job that parked or failed
		// would hold the whole key half-open until its lease ran out.
		defer rt.releaseUnreportedProbe(ctx, c)
	}
	if !c.adm.Probe && pause != nil {
		return park(ctx, job, max(time.Until(pause.Until), 100*time.Millisecond))
	}

	var record map[string]any
	if err := json.Unmarshal(job.Args.Record, &record); err != nil {
		return rt.deadLetter(ctx, c, "rejected", ReasonConfig, "record is not a JSON object")
	}
	prompt, err := p.Render(record)
	if err != nil {
		return rt.deadLetter(ctx, c, "rejected", "template_error", err.Error())
	}
	c.req = provider.Request{
		Model: m.Name, System: p.System, Prompt: prompt, MaxTokens: p.MaxTokens,
		Temperature: p.Temperature, JSON: p.Output == config.OutputJSON, RecordID: job.Args.RecordID,
	}
	hash := provider.RequestHash(c.req)
	c.req.IdempotencyKey = provider.IdempotencyKey(job.Args.Batch, job.Args.RecordID, p.Name, hash)

	// Before any resend: what does the ledger know about this request?
	prior, err := ledger.PriorOutcomeForJob(ctx, rt.pool, c.req.IdempotencyKey, job.ID, job.Args.Batch, job.Args.RecordID)
	if err != nil {
		return fmt.Errorf("ledger look-up: %w", err)
	}
	if prior.DeadLettered {
		// An earlier run wrote the dead letter and died before its cancel
		// landed: never call again.
		return river.JobCancel(errors.New("record already dead-lettered"))
	}
	if prior.OKAttemptID != 0 && prior.ResultStored {
		// Stored by a run whose completion did not land: finish, don't call.
		return rt.complete(ctx, c, nil, false)
	}
	if prior.JobAmbiguous > p.AmbiguousRetries {
		return rt.deadLetter(ctx, c, "ambiguous", ReasonAmbiguousExhausted,
			fmt.Sprintf("%d calls with no answer (pipeline ambiguous_retries %d)", prior.JobAmbiguous, p.AmbiguousRetries))
	}

	// A retry is a resend after a transient, ambiguous or unfinished attempt
	// of this job; a resend after a throttle or an exhausted key is not (it
	// costs no attempt either), so it does not draw on the retry budget.
	retry := prior.JobLastClass == classify.Transient.String() || prior.JobLastClass == classify.Ambiguous.String() ||
		prior.JobLastClass == string(ledger.AttemptIntent)
	if retry && k.cfg.RetryBudget > 0 {
		if over, err := rt.overRetryBudget(ctx, k); err != nil {
			return err
		} else if over {
			rt.log.DebugContext(ctx, "retry deferred: fleet retry budget spent", "key", k.cfg.Name, "job_id", job.ID)
			return park(ctx, job, rt.opts.RetryDefer/2+rand.N(rt.opts.RetryDefer))
		}
	}

	release, err := k.limiter.Acquire(ctx)
	if err != nil {
		return park(ctx, job, 0)
	}
	defer release()
	// A long wait for a slot (the limit was lowered by throttling) must not
	// eat into the call's own timeout: River's deadline for this run would
	// cut the call mid-flight and make it ambiguous.
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < k.cfg.Timeout+rt.opts.JobMargin/4 {
		return park(ctx, job, 0)
	}
	// pacing: this process's share of the key's rate (worker/pacing.go).
	estTokens := estimateTokens(c.req)
	if d, err := rt.pace(ctx, k, estTokens); err != nil {
		return park(ctx, job, d)
	}

	// The intent row is also the call's reservation against the batch's
	// spend cap.
	c.attemptID, err = ledger.ReserveAttempt(ctx, rt.pool, ledger.Intent{
		Batch: job.Args.Batch, RecordID: job.Args.RecordID, JobID: job.ID, Attempt: job.Attempt,
		Key: k.cfg.Name, Model: m.Name, IdempotencyKey: c.req.IdempotencyKey, RequestHash: hash,
		IsRetry: retry, EstCostUSD: estimateCost(m, c.req), InFlightFor: k.cfg.Timeout + rt.opts.JobMargin,
	})
	var budgetErr *ledger.BudgetError
	if errors.As(err, &budgetErr) {
		if budgetErr.Wait {
			// Worst-case reservations of calls in flight fill the cap; most
			// of them will not be spent. Try again shortly.
			return park(ctx, job, rt.opts.BudgetRecheck/10+rand.N(rt.opts.BudgetRecheck/10+1))
		}
		if budgetErr.Paused {
			rt.alerter.Alert(ctx, keys.Alert{Kind: keys.AlertBudgetReached, Key: k.cfg.Name, Batch: job.Args.Batch,
				Message: "batch spend cap reached: its jobs stay queued; raise it with `triage batch budget`",
				Fields:  map[string]any{"budget_usd": budgetErr.BudgetUSD, "spent_usd": budgetErr.SpentUSD, "in_flight_usd": budgetErr.ReservedUSD}})
		}
		return park(ctx, job, rt.opts.BudgetRecheck)
	}
	if err != nil {
		return fmt.Errorf("ledger intent: %w", err)
	}
	c.res, err = k.client.Do(ctx, c.req)
	if err != nil {
		// A request the client refuses to build: configuration, not the provider.
		_ = rt.finish(ctx, c, ledger.AttemptFailed)
		return rt.deadLetter(ctx, c, "rejected", ReasonConfig, err.Error())
	}
	if ctx.Err() != nil {
		// This run was stopped (shutdown, River's timeout), not answered: the
		// call may have gone out. Keep it possibly billed and come back
		// without spending an attempt; the ledger counts it as ambiguous for
		// this job, and the next send reuses its idempotency key.
		status := ledger.AttemptFailed
		if c.res.Observation.Phase == classify.PhaseSentNoResponse {
			status = ledger.AttemptPossiblyBilled
		}
		c.verdict = classify.Verdict{Class: classify.Ambiguous, Reason: "worker_stopped", Known: true}
		_ = rt.finish(ctx, c, status)
		return park(ctx, job, time.Second)
	}
	c.verdict = rt.cfg.Classifier().Classify(c.res.Observation)
	rt.observePace(k, c, estTokens) // pacing: headers and outcome
	rt.log.DebugContext(ctx, "call", "key", k.cfg.Name, "job_id", job.ID, "batch", job.Args.Batch, "record_id", job.Args.RecordID,
		"status", c.res.Observation.Status, "phase", c.res.Observation.Phase, "class", c.verdict.Class.String(), "reason", c.verdict.Reason)
	if !c.verdict.Known {
		// Once per key, status and code an hour, fleet-wide: a flood of one
		// unknown error is one alert, not one per call.
		kind := fmt.Sprintf("unknown_error:%d:%s:%s", c.res.Observation.Status, deref(c.verdict.Code), rt.now().UTC().Format("2006-01-02T15"))
		rt.alertOnce(ctx, k.cfg.Name, kind, keys.Alert{Kind: keys.AlertUnknownError, Key: k.cfg.Name, Batch: job.Args.Batch,
			Message: "an error no rule knows: check the dead letters and the classifier",
			Fields:  map[string]any{"status": c.res.Observation.Status, "code": deref(c.verdict.Code), "class": c.verdict.Class.String()}})
	}
	if o := rt.opts.Observer; o != nil {
		o.ObserveCall(CallEvent{Key: k.cfg.Name, Class: c.verdict.Class.String(), Status: c.res.Observation.Status,
			Known: c.verdict.Known, Retry: retry,
			CostUSD: cost(m, c.res.InputTokens, c.res.OutputTokens), Elapsed: c.res.Elapsed})
	}
	return rt.react(ctx, c, prior)
}

func (r *Runtime) react(ctx context.Context, c *call, prior ledger.Prior) error {
	k, job := c.key, c.job
	switch c.verdict.Class {
	case classify.OK:
		output, bad := usableOutput(c)
		if bad != "" {
			// A 2xx body that is not the vendor's format tells no usage: the
			// call may have been billed, so it stays possibly billed at its
			// estimate rather than being recorded as free.
			status := ledger.AttemptOK
			if c.res.Malformed != "" {
				status = ledger.AttemptPossiblyBilled
			}
			_ = r.finish(ctx, c, status)
			r.probeDone(ctx, c, true)
			return r.deadLetter(ctx, c, "ok", ReasonInvalidOutput, bad)
		}
		if err := r.complete(ctx, c, output, prior.Ambiguous > 0); err != nil {
			return err
		}
		k.limiter.OnSuccess()
		r.probeDone(ctx, c, true)
		return nil

	case classify.Transient:
		_ = r.finish(ctx, c, ledger.AttemptFailed)
		r.probeDone(ctx, c, false)
		if job.Attempt >= c.pipeline.MaxAttempts || k.cfg.RetryBudget == 0 {
			return r.deadLetter(ctx, c, "transient", ReasonRetriesExhausted,
				fmt.Sprintf("%d attempts (max_attempts %d, key retry_budget %g); last: %s", job.Attempt, c.pipeline.MaxAttempts, k.cfg.RetryBudget, c.verdict.Reason))
		}
		if ra := retryAfter(c.verdict); ra > 0 {
			r.retryAfter.Store(job.ID, ra)
		}
		return &CallError{Class: c.verdict.Class, Status: c.res.Observation.Status, Code: deref(c.verdict.Code), Reason: c.verdict.Reason}

	case classify.Throttled:
		_ = r.finish(ctx, c, ledger.AttemptFailed)
		r.probeDone(ctx, c, false)
		// pacing: keys.ThrottleScopeFor decides whether only this job waits
		// or the whole key (worker/pacing.go).
		wait, err := r.throttleWait(ctx, c)
		if err != nil {
			return fmt.Errorf("pause key: %w", err)
		}
		return river.JobSnooze(wait)

	case classify.Exhausted:
		_ = r.finish(ctx, c, ledger.AttemptFailed)
		tripped, err := r.store.Trip(context.WithoutCancel(ctx), k.cfg.Name, c.adm, c.verdict.Reason, k.cfg.ProbeInterval)
		if err != nil {
			return fmt.Errorf("trip breaker: %w", err)
		}
		c.probeReported = true // Trip with a probe admission is its failure
		_ = r.supervisor.Reconcile(ctx, k.cfg.Name)
		if tripped {
			r.alerter.Alert(ctx, keys.Alert{Kind: keys.AlertKeyExhausted, Key: k.cfg.Name, Batch: job.Args.Batch,
				Message: "key exhausted: its jobs stay queued; one probe every probe_interval until it works again",
				Fields: map[string]any{"status": c.res.Observation.Status, "code": deref(c.verdict.Code), "reason": c.verdict.Reason,
					"probe_interval": k.cfg.ProbeInterval.String()}})
		}
		return park(ctx, job, k.cfg.ProbeInterval)

	case classify.Ambiguous:
		_ = r.finish(ctx, c, ledger.AttemptPossiblyBilled)
		r.probeDone(ctx, c, false)
		if prior.JobAmbiguous+1 > c.pipeline.AmbiguousRetries || job.Attempt >= c.pipeline.MaxAttempts {
			return r.deadLetter(ctx, c, "ambiguous", ReasonAmbiguousExhausted,
				fmt.Sprintf("no answer after %d sends with the same idempotency key; last: %s", prior.JobAmbiguous+1, c.verdict.Reason))
		}
		return &CallError{Class: c.verdict.Class, Status: c.res.Observation.Status, Code: deref(c.verdict.Code), Reason: c.verdict.Reason}

	default: // Rejected
		_ = r.finish(ctx, c, ledger.AttemptFailed)
		r.probeDone(ctx, c, false)
		return r.deadLetter(ctx, c, c.verdict.Class.String(), c.verdict.Reason, "")
	}
}

// probeDone reports a probe's outcome to the breaker. Exhausted probes are
// reported through Trip; anything that says nothing about the balance gives
// the claim back.
func (r *Runtime) probeDone(ctx context.Context, c *call, success bool) {
	if !c.adm.Probe {
		return
	}
	c.probeReported = true
	ctx = context.WithoutCancel(ctx)
	name := c.key.cfg.Name
	if success {
		closed, err := r.store.ProbeResult(ctx, name, c.adm, true, c.key.cfg.ProbeInterval)
		if err != nil {
			r.log.ErrorContext(ctx, "probe result", "key", name, "err", err)
			return
		}
		_ = r.supervisor.Reconcile(ctx, name)
		if closed {
			r.alerter.Alert(ctx, keys.Alert{Kind: keys.AlertKeyResumed, Key: name, Batch: c.job.Args.Batch,
				Message: "probe succeeded: key resumed, its queue drains again"})
		}
		return
	}
	if _, err := r.store.ReleaseProbe(ctx, name, c.adm, c.key.cfg.ProbeInterval); err != nil {
		r.log.ErrorContext(ctx, "release probe", "key", name, "err", err)
	}
}

// releaseUnreportedProbe gives the probe claim back when the run ends
// without reporting the probe's outcome (it parked, failed or was stopped).
func (r *Runtime) releaseUnreportedProbe(ctx context.Context, c *call) {
	if c.probeReported {
		return
	}
	if _, err := r.store.ReleaseProbe(context.WithoutCancel(ctx), c.key.cfg.Name, c.adm, time.Second); err != nil {
		r.log.ErrorContext(ctx, "release probe", "key", c.key.cfg.Name, "err", err)
	}
}

// complete stores the result, finishes the attempt, resolves earlier
// ambiguous sends under the same idempotency key and completes the job, all
// in one transaction: "completed" means "result stored".
func (r *Runtime) complete(ctx context.Context, c *call, output json.RawMessage, hadAmbiguous bool) error {
	// A paid-for answer is stored even if the run is being stopped.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	if c.attemptID != 0 {
		if err := ledger.FinishAttempt(ctx, tx, c.attemptID, r.outcome(c, ledger.AttemptOK)); err != nil {
			return fmt.Errorf("complete: finish attempt: %w", err)
		}
		if err := ledger.StoreResult(ctx, tx, c.job.Args.Batch, c.job.Args.RecordID, c.attemptID, output); err != nil {
			return fmt.Errorf("complete: store result: %w", err)
		}
		// Earlier sends that got no answer are settled as billed once only
		// where the endpoint is known to replay a repeated Idempotency-Key.
		if hadAmbiguous && c.key.cfg.IdempotentReplay {
			if _, err := ledger.ResolvePossiblyBilled(ctx, tx, c.req.IdempotencyKey); err != nil {
				return fmt.Errorf("complete: resolve: %w", err)
			}
		}
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, c.job); err != nil {
		return fmt.Errorf("complete: job: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("complete: commit: %w", err)
	}
	return nil
}

func (r *Runtime) finish(ctx context.Context, c *call, status ledger.AttemptStatus) error {
	if c.attemptID == 0 {
		return nil
	}
	// The outcome must land even when the job's context is ending: a missing
	// outcome would later read as an ambiguous (possibly billed) call.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := ledger.FinishAttempt(ctx, r.pool, c.attemptID, r.outcome(c, status))
	if err != nil && !errors.Is(err, ledger.ErrAttemptFinished) {
		r.log.ErrorContext(ctx, "ledger outcome", "attempt_id", c.attemptID, "err", err)
		return err
	}
	return nil
}

func (r *Runtime) outcome(c *call, status ledger.AttemptStatus) ledger.Outcome {
	return ledger.Outcome{
		Status: status, Class: c.verdict.Class.String(), HTTPStatus: c.res.Observation.Status,
		VendorCode: deref(c.verdict.Code), Reason: c.verdict.Reason,
		InputTokens: c.res.InputTokens, OutputTokens: c.res.OutputTokens,
		CostUSD: cost(c.model, c.res.InputTokens, c.res.OutputTokens),
	}
}

// deadLetter records the record in the dead-letter table and cancels the
// job, so it is never resent as is. A dead letter that already exists for
// the record (a crash after writing it) is reused.
func (r *Runtime) deadLetter(ctx context.Context, c *call, class, reason, detail string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	job := c.job
	row := ledger.DeadLetterRow{
		Batch: job.Args.Batch, RecordID: job.Args.RecordID, JobID: job.ID, Pipeline: job.Args.Pipeline,
		Class: class, Reason: reason, HTTPStatus: c.res.Observation.Status, VendorCode: deref(c.verdict.Code),
		Attempts: job.Attempt, Rule: c.verdict.Rule, Unknown: c.verdict.Rule != "" && !c.verdict.Known,
	}
	if c.key != nil {
		row.Key = c.key.cfg.Name
	}
	if c.req.Model != "" {
		row.Request, _ = json.Marshal(requestView(c.req))
	} else {
		row.Request = job.Args.Record
	}
	row.ErrorExcerpt = c.res.Observation.Body
	if detail != "" {
		if row.ErrorExcerpt != "" {
			row.ErrorExcerpt = detail + "\n" + row.ErrorExcerpt
		} else {
			row.ErrorExcerpt = detail
		}
	}
	if c.key != nil && c.key.apiKey != "" {
		// ledger.Redact knows key shapes; this knows the key itself.
		row.ErrorExcerpt = strings.ReplaceAll(row.ErrorExcerpt, c.key.apiKey, "[redacted api key]")
	}
	id, err := ledger.AddDeadLetter(ctx, r.pool, row)
	if err != nil {
		return fmt.Errorf("dead letter: %w", err)
	}
	r.log.WarnContext(ctx, "dead letter", "dead_letter_id", id, "batch", job.Args.Batch, "record_id", job.Args.RecordID,
		"class", class, "reason", reason, "status", c.res.Observation.Status, "code", deref(c.verdict.Code))
	return river.JobCancel(&CallError{Class: c.verdict.Class, Status: c.res.Observation.Status, Code: deref(c.verdict.Code), Reason: reason})
}

// requestView is the rendered request as kept in a dead letter: everything
// needed to understand or replay it, never the API key.
func requestView(r provider.Request) map[string]any {
	v := map[string]any{"model": r.Model, "prompt": r.Prompt, "max_tokens": r.MaxTokens, "json": r.JSON, "idempotency_key": r.IdempotencyKey}
	if r.System != "" {
		v["system"] = r.System
	}
	if r.Temperature != nil {
		v["temperature"] = *r.Temperature
	}
	return v
}

// usableOutput checks the answer against the pipeline's output contract.
func usableOutput(c *call) (json.RawMessage, string) {
	if c.res.Malformed != "" {
		return nil, "the 2xx body is not the vendor's wire format: " + c.res.Malformed
	}
	if c.pipeline.Output == config.OutputJSON {
		text := stripFence(c.res.Content)
		if !gjson.Valid(text) || !gjson.Parse(text).IsObject() {
			return nil, "the answer is not a JSON object"
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
func ownSnoozes(job *river.Job[Args]) int {
	return int(gjson.GetBytes(job.Metadata, "snoozes").Int() - gjson.GetBytes(job.Metadata, metaParked).Int())
}

// park snoozes the job without charging it a snooze.
func park(ctx context.Context, job *river.Job[Args], d time.Duration) error {
	_ = river.MetadataSet(ctx, metaParked, gjson.GetBytes(job.Metadata, metaParked).Int()+1)
	return river.JobSnooze(d)
}

// overRetryBudget reports whether the key's open retries (not succeeded)
// over the window have reached retry_budget of its first calls, fleet-wide,
// from the ledger; the floor lets a quiet key retry at all.
func (r *Runtime) overRetryBudget(ctx context.Context, k *keyRuntime) (bool, error) {
	u, err := ledger.RetryUsageByKey(ctx, r.pool, k.cfg.Name, r.now().Add(-r.opts.RetryWindow))
	if err != nil {
		return false, fmt.Errorf("retry budget: %w", err)
	}
	return u.OpenRetries >= RetryAllowance(k.cfg.RetryBudget, u.FirstCalls, r.opts.RetryFloor), nil
}

// RetryAllowance is how many open retries a key may have over the retry
// window: retry_budget of its first calls, but at least floor, so a quiet key
// can still retry; none at all when retry_budget is 0 (transient failures
// are then not retried). The CLI and the metrics show the same number.
func RetryAllowance(retryBudget float64, firstCalls, floor int) int {
	if retryBudget <= 0 {
		return 0
	}
	return int(math.Ceil(max(float64(floor), retryBudget*float64(firstCalls))))
}

func retryAfter(v classify.Verdict) time.Duration {
	if v.RetryAfterS == nil || *v.RetryAfterS <= 0 {
		return 0
	}
	return time.Duration(*v.RetryAfterS * float64(time.Second))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (r *Runtime) now() time.Time {
	if r.opts.Clock != nil {
		return r.opts.Clock.Now()
	}
	return time.Now()
}
