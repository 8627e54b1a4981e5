package jobrun

import (
	"context"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/provider"
)

// sendBackground is send's call for a key in the Responses API's
// background mode (Key.Background): a response an earlier run of this
// request created and left running (its id stored on its attempt) is
// polled, not created again; otherwise the create answers at once with
// the response's id, stored on this attempt before the first poll; then
// the response is polled to its end. The answer lost to a stop or a crash
// is then never the model's, only, at worst, the create's.
func (r *Runner) sendBackground(ctx context.Context, c *call) (provider.Result, error) {
	k := c.jobKey
	id, err := ledger.PendingResponseID(ctx, r.pool, c.req.IdempotencyKey)
	if err != nil {
		// Not knowing is not a reason to pay twice: try again later, as a
		// call that was not sent.
		r.log.ErrorContext(ctx, "background response look-up", "key", k.cfg.Name, "job_id", c.job.ID, "err", err)
		return provider.Result{Observation: classify.Observation{Vendor: k.cfg.Vendor, Path: k.cfg.Path, Phase: classify.PhaseNotSent},
			NetworkError: "the ledger could not say whether a background response is running"}, nil
	}
	res := provider.Result{}
	if id == "" {
		res, err = k.client.Do(ctx, c.req)
		if err != nil || !res.Pending() {
			return res, err
		}
		id = res.ResponseID
	} else {
		c.resumed = true
		r.log.InfoContext(ctx, "background response left by an earlier run: polling it, not creating another",
			"key", k.cfg.Name, "job_id", c.job.ID, "record_id", c.job.Args.RecordID, "response_id", id)
	}
	if c.attemptID != 0 {
		if err := ledger.SetAttemptResponseID(context.WithoutCancel(ctx), r.pool, c.attemptID, id); err != nil {
			r.log.ErrorContext(ctx, "store background response id", "key", k.cfg.Name, "attempt_id", c.attemptID, "err", err)
		}
	}
	res = r.pollResponse(ctx, c, id)
	if c.resumed && res.ResponseStatus == "cancelled" {
		// Cancelled with its batch, which was then taken up again: this
		// run's answer is a new response.
		c.resumed = false
		if res, err = k.client.Do(ctx, c.req); err != nil || !res.Pending() {
			return res, err
		}
		if err := ledger.SetAttemptResponseID(context.WithoutCancel(ctx), r.pool, c.attemptID, res.ResponseID); err != nil {
			r.log.ErrorContext(ctx, "store background response id", "key", k.cfg.Name, "attempt_id", c.attemptID, "err", err)
		}
		res = r.pollResponse(ctx, c, res.ResponseID)
	}
	return res, nil
}

// pollResponse polls a background response until it ends, waiting
// config.BackgroundPollMin, doubling up to config.BackgroundPollMax,
// between polls. A poll that fails (network, 5xx, 429) is tried again. A
// run stopped meanwhile (a shutdown: the answer is still wanted) returns a
// result sent but unanswered, so the attempt stays possibly billed with
// its response id, for the next run to poll. A batch cancelled by hand
// meanwhile no longer wants the answer: the response is cancelled at the
// provider, and the result is unanswered too (the job's next run
// dead-letters the record cancelled).
func (r *Runner) pollResponse(ctx context.Context, c *call, id string) provider.Result {
	k := c.jobKey
	wait := config.BackgroundPollMin
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return provider.Result{Observation: classify.Observation{Vendor: k.cfg.Vendor, Path: k.cfg.Path, Phase: classify.PhaseSentNoResponse},
				NetworkError: "stopped while the background response " + id + " was running", ResponseID: id}
		case <-t.C:
		}
		wait = min(2*wait, config.BackgroundPollMax)
		res, err := k.client.Poll(ctx, id)
		if err != nil {
			r.log.ErrorContext(ctx, "poll background response", "key", k.cfg.Name, "response_id", id, "err", err)
			continue
		}
		o := res.Observation
		if o.Phase != classify.PhaseResponse || o.Status == 429 || o.Status >= 500 || res.Pending() {
			if b, err := ledger.GetBatch(ctx, r.pool, c.job.Args.Batch); err == nil && b.State == ledger.BatchCancelled {
				cr, err := k.client.Cancel(context.WithoutCancel(ctx), id)
				r.log.InfoContext(ctx, "batch cancelled: background response cancelled at the provider", "key", k.cfg.Name,
					"job_id", c.job.ID, "record_id", c.job.Args.RecordID, "response_id", id, "status", cr.ResponseStatus, "err", err)
				return provider.Result{Observation: classify.Observation{Vendor: k.cfg.Vendor, Path: k.cfg.Path, Phase: classify.PhaseSentNoResponse},
					NetworkError: "the batch was cancelled: background response " + id + " cancelled at the provider", ResponseID: id}
			}
			continue
		}
		return res
	}
}
