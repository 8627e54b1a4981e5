package jobrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/facts"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/provider"
)

// The work path of a job whose pipeline has mode = "batch" or "auto". Such a
// job makes no call itself: its first run writes the ledger intent and a
// pending line (the rendered vendor body), and sleeps; the key's submitter
// (worker/submitter) sends the line in a provider batch, stores the answer
// and wakes the job; the job's next run turns the answer into the call's
// Result and goes through the same classify, decide.After and apply as a
// synchronous call.

// batchInFlight is how long a batch attempt's intent counts as a
// reservation in flight against a budget, not as possibly billed: the
// 24 h completion window and an hour to collect.
const batchInFlight = 25 * time.Hour

// batchPrior removes the open line's own intent from what the ledger says
// about earlier sends: it is a line waiting for its answer, not a send
// whose worker died.
func batchPrior(p *ledger.Prior, l ledger.BatchLine) {
	if l.ID == 0 || l.AttemptID == 0 || l.State == ledger.LineApplied {
		return
	}
	p.JobCalls = max(0, p.JobCalls-1)
	p.JobAmbiguous = max(0, p.JobAmbiguous-1)
	p.Ambiguous = max(0, p.Ambiguous-1)
	p.JobLast = ledger.LastAttempt{}
}

// lineSender points c at the key and model that sent its open line, whose
// answer is decoded with that key's format and priced at that model's
// prices (ledger.BatchLine.Key, Model): a job's model can have changed
// since (a pipeline's configuration edited, a move made before the
// open-line rule). False when this process does not work the sending key.
func (r *Runner) lineSender(c *call) bool {
	l := c.line
	if l.Key != "" && l.Key != c.key.cfg.Name {
		k := r.keys[l.Key]
		if k == nil {
			return false
		}
		c.key = k
	}
	if l.Model != "" && l.Model != c.model.Name {
		if m, err := r.cfg.Model(l.Model); err == nil {
			c.model = m
		}
	}
	return true
}

// noDone reports nothing: the Done of a run whose outcome is not its own
// key's (the answer of a line another key sent).
func noDone(context.Context, keys.Outcome, string) (keys.Report, error) { return keys.Report{}, nil }

// workBatch runs the batch side of a job once admitted: the job of a batch
// or auto pipeline, and any job with an open line, whatever its pipeline's
// mode is now. handled false: the job goes on as a synchronous call (auto
// mode near the deadline, or a pipeline now in sync mode, once an unsent
// line is taken back).
func (r *Runner) workBatch(ctx context.Context, c *call, b decide.BeforeCall, prior ledger.Prior, done keys.Done) (bool, error) {
	l, job := c.line, c.job
	sync := decide.BatchDeadlineNear(c.pipeline, l.Deadline, r.now()) || !c.pipeline.UsesBatch()
	switch {
	case l.ID == 0:
		if sync {
			return false, nil
		}
		return true, r.addLine(ctx, c, b, prior)
	case l.State == ledger.LineAnswered:
		return true, r.applyLine(ctx, c, prior, done)
	case sync && (l.State == ledger.LinePending || l.State == ledger.LineNotRun):
		took, err := ledger.TakeBackBatchLine(ctx, r.pool, l.ID, l.AttemptID)
		if err != nil {
			return true, err
		}
		if took {
			r.log.DebugContext(ctx, "batch line taken back: the deadline is near or the pipeline is in sync mode, calling synchronously",
				"job_id", job.ID, "batch", job.Args.Batch, "record_id", job.Args.RecordID)
			c.line = ledger.BatchLine{}
			return false, nil
		}
		return true, park(ctx, job, r.batchWait())
	case l.State == ledger.LineNotRun:
		// Expired, canceled or missing from the results: nothing was billed,
		// so the same attempt goes into the next provider batch.
		if err := ledger.RequeueBatchLine(ctx, r.pool, l.ID); err != nil {
			return true, err
		}
		return true, park(ctx, job, b.UnsentLineWait())
	case l.State == ledger.LinePending:
		return true, park(ctx, job, b.UnsentLineWait())
	default: // submitted: the submitter wakes the job
		return true, park(ctx, job, r.batchWait())
	}
}

func (r *Runner) batchWait() time.Duration { return r.opts.BatchWait }

// addLine writes the job's ledger intent (at batch prices, reserved against
// the batch's budget like a call) and its pending line in one transaction,
// then sleeps until the submitter wakes it.
func (r *Runner) addLine(ctx context.Context, c *call, b decide.BeforeCall, prior ledger.Prior) error {
	job, k, m := c.job, c.key, c.model
	// A batch line is never a background response: the batch is the
	// background.
	line := c.req
	line.Background = false
	body, err := k.client.Body(line)
	if err != nil {
		return r.apply(ctx, c, decide.DeadLetter(classify.Rejected, decide.ReasonConfig, err.Error()), keys.Report{})
	}
	est := m.BatchCost(c.req.EstimatedTokens(), c.req.MaxTokens)
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("batch line: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	attemptID, err := ledger.ReserveAttempt(ctx, tx, ledger.Intent{
		Batch: job.Args.Batch, RecordID: job.Args.RecordID, JobID: job.ID, Attempt: prior.JobCalls + 1,
		Key: k.cfg.Name, Model: m.Name, IdempotencyKey: c.req.IdempotencyKey, RequestHash: c.hash,
		IsRetry: prior.JobLast.Retry(), Change: changeLabel(c.change), EstCostUSD: est, InFlightFor: batchInFlight,
		Mode: ledger.ModeBatch,
	})
	var budgetErr *ledger.BudgetError
	var held *ledger.HeldError
	if errors.As(err, &held) {
		_ = tx.Rollback(ctx)
		b.Hold = facts.Hold(held.State)
		return r.apply(ctx, c, decide.Before(b), keys.Report{})
	}
	if errors.As(err, &budgetErr) {
		if budgetErr.Paused {
			// The pause was written in its own transaction (savepoint
			// released): keep it.
			_ = tx.Commit(ctx)
			r.alerter.Alert(ctx, keys.Alert{Kind: keys.AlertBudgetReached, Key: k.cfg.Name, Batch: job.Args.Batch,
				Message: "batch spend cap reached: its jobs stay queued; raise it with `triage batch budget`",
				Fields:  map[string]any{"budget_usd": budgetErr.BudgetUSD, "spent_usd": budgetErr.SpentUSD, "in_flight_usd": budgetErr.ReservedUSD}})
		}
		b.OverBudget, b.BudgetRecheck = true, r.opts.BudgetRecheck
		return r.apply(ctx, c, decide.Before(b), keys.Report{})
	}
	if err != nil {
		return fmt.Errorf("batch line: ledger intent: %w", err)
	}
	_, err = ledger.AddBatchLine(ctx, tx, ledger.NewBatchLine{
		Key: k.cfg.Name, Batch: job.Args.Batch, RecordID: job.Args.RecordID, JobID: job.ID,
		CustomID: c.req.IdempotencyKey, AttemptID: attemptID, Body: json.RawMessage(body),
	})
	if errors.Is(err, ledger.ErrLineExists) {
		// Another run of this job wrote it meanwhile (a rescued job).
		return park(ctx, job, r.batchWait())
	}
	if err != nil {
		return fmt.Errorf("batch line: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("batch line: commit: %w", err)
	}
	return park(ctx, job, b.UnsentLineWait())
}

// applyLine turns the line's stored answer into the call's Result and goes
// on exactly as a synchronous call that got this answer: classify,
// decide.After, apply. What is a wait for a synchronous call (a transient
// failure's backoff, a throttle) is the next provider batch here.
func (r *Runner) applyLine(ctx context.Context, c *call, prior ledger.Prior, done keys.Done) error {
	k, p, l := c.key, c.pipeline, c.line
	c.attemptID, c.lineID = l.AttemptID, l.ID
	c.calls = prior.JobCalls + 1
	ans := l.Answer
	if ans == nil {
		return fmt.Errorf("batch line %d is answered without an answer", l.ID)
	}
	if ans.RejectReason != "" {
		c.verdict = classify.Verdict{Class: classify.Rejected, Reason: ans.RejectReason, Known: true}
		if ans.RejectCode != "" {
			c.verdict.Code = &ans.RejectCode
		}
		rx := decide.DeadLetter(classify.Rejected, ans.RejectReason, ans.RejectDetail)
		rx.Outcome = decide.OutcomeFailed
		return r.apply(ctx, c, rx, keys.Report{})
	}
	o := ans.Observation
	c.res = provider.DecodeResponse(k.client.Format(), k.cfg.Vendor, k.cfg.Path, o.Status, o.Headers, []byte(o.Body))
	if o.Phase != "" && o.Phase != classify.PhaseResponse {
		// A line that may have run but whose result could not be read
		// (worker/submitter): no answer, as a send whose answer was lost.
		c.res.Observation.Phase = o.Phase
	}
	c.res, c.verdict = k.observe(c.res, r.cfg.Classifier())
	a := decide.AfterCall{
		JobCalls: prior.JobCalls, MaxAttempts: p.MaxAttempts,
		JobAmbiguous: prior.JobAmbiguous, AmbiguousRetries: p.AmbiguousRetries,
		NoRetries: k.cfg.RetryBudget == 0, RetryBudget: k.cfg.RetryBudget,
		Backoff: decide.BatchRequeueWait, BackoffCap: decide.BatchRequeueWait,
		ProbeInterval: k.cfg.ProbeInterval, Verdict: c.verdict, Phase: c.res.Observation.Phase,
	}
	if len(p.Fallback) > 0 {
		a.Fallback.Model = decide.FirstCapable(r.cfg, p, c.model.Name, need(c.req))
	}
	r.observe(ctx, c)
	switch c.verdict.Class {
	case classify.OK:
		var bad string
		c.output, bad = usableOutput(c)
		a.Unusable, a.Malformed = bad, c.res.Malformed != ""
	case classify.Rejected:
		a.Change = c.overflowFacts(c.res.Observation)
	case classify.Throttled:
		// A line throttled inside a batch says nothing about the key's
		// synchronous rate: only this line waits, for the next batch.
		a.Throttle = decide.BatchRequeueWait
	}
	rep := r.report(ctx, c, done, facts.BatchBreakerOutcome(a))
	// An error line of a result counts toward the key's rejection streak
	// as a call's error does, and a good line ends it (a line's throttle
	// does not feed the throttle wall: it is about the batch, not the
	// key's rate). A create's refusal given to each line is not a result:
	// the submitter already bounds those (MaxRefusals, batch_refused).
	if !ans.Refused {
		a.Held = r.watchLine(ctx, c, a)
	}
	return r.apply(ctx, c, decide.ForBatchLine(decide.After(a)), rep)
}

// lineCost prices a batch line at the model's batch prices, and what the
// same tokens would have cost synchronously.
func lineCost(m *config.Model, in, out int) (batch, sync float64) {
	return m.BatchCost(in, out), m.Cost(in, out)
}

// closeLine settles the job's open line in tx, for a run that ends the job
// (completed or dead-lettered), by the open-line rule: the line whose
// answer this run applied is closed; an unsent one is taken back (its
// attempt finished as not run, $0); one in a live provider batch or
// holding an answer this run did not apply stays open, for the key's
// submitter to collect and record once the job is gone (its real cost,
// its attempt finished: submitter.ReasonJobGone), held for a requeue.
// decide.Before keeps a
// job with such a line from ending, so that last case is a safety net.
func closeLine(ctx context.Context, tx pgx.Tx, c *call) error {
	l := c.line
	switch {
	case l.ID == 0:
		return nil
	case c.lineID == l.ID:
		return ledger.CloseBatchLine(ctx, tx, l.ID)
	case l.Hold() == ledger.HoldUnsent:
		_, err := ledger.TakeBackBatchLine(ctx, tx, l.ID, l.AttemptID)
		return err
	}
	return nil
}

// finishLine records the applied line's attempt outcome and closes the
// line in one transaction: the job's next run writes a new line (the next
// provider batch) or calls synchronously.
func (r *Runner) finishLine(ctx context.Context, c *call, status ledger.AttemptStatus) error {
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if err := ledger.FinishAttempt(ctx, tx, c.attemptID, r.outcome(c, status)); err != nil && !errors.Is(err, ledger.ErrAttemptFinished) {
			return err
		}
		return ledger.CloseBatchLine(ctx, tx, c.lineID)
	})
	if err != nil {
		r.log.ErrorContext(ctx, "ledger outcome of a batch line", "attempt_id", c.attemptID, "line_id", c.lineID, "err", err)
	}
	return err
}
