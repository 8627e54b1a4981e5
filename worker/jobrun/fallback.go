package jobrun

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/facts"
	"github.com/triage-dev/triage/worker/fallbackmove"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/provider"
)

// need is what request r asks of a model (decide.Capable).
func need(r provider.Request) decide.Need {
	return decide.Need{InputTokens: r.EstimatedTokens(), MaxTokens: r.MaxTokens, JSON: r.JSON}
}

// applyFallback carries out a decide.ReactFallback for the running job: it moves
// to the fallback's key queue and runs there at once (a park that charges
// no snooze). Refused by fallback_max_share, the job reacts as it would
// have without a fallback.
func (r *Runner) applyFallback(ctx context.Context, c *call, rx decide.Reaction) error {
	job, mv := c.job, rx.Fallback
	ok, err := fallbackmove.Move(context.WithoutCancel(ctx), r.pool, r.opts.Schema,
		fallbackmove.Job{ID: job.ID, Args: job.Args, Queue: job.Queue, Line: c.line},
		mv.Model, c.pipeline.FallbackMaxShare, fallbackmove.RunningStates)
	if err != nil {
		return err
	}
	if !ok {
		return r.apply(ctx, c, mv.Otherwise, keys.Report{})
	}
	_ = r.finish(ctx, c, facts.AttemptStatus(rx.Outcome))
	r.log.InfoContext(ctx, "fallback", "job_id", job.ID, "batch", job.Args.Batch, "record_id", job.Args.RecordID,
		"from_model", c.model.Name, "to_model", mv.Model.Name, "to_key", mv.Model.Key)
	return park(ctx, job, time.Millisecond)
}

// FallbackPlan is what the fallback mover (worker/fallbackmove) needs of a
// queued job: its pipeline, its model and what its rendered request asks
// of a model. false leaves the job to its own run: it cannot be looked up,
// its pipeline has no fallback, or it cannot be rendered (its run
// dead-letters it).
func (r *Runner) FallbackPlan(job *river.Job[jobargs.Args]) (fallbackmove.Plan, bool) {
	p, m, _, err := r.lookup(job.Args)
	if err != nil || len(p.Fallback) == 0 {
		return fallbackmove.Plan{}, false
	}
	c := &call{job: job, pipeline: p, model: m}
	if rx := c.render(); rx.Kind != decide.ReactGo {
		return fallbackmove.Plan{}, false
	}
	return fallbackmove.Plan{Pipeline: p, Model: m, Need: need(c.req)}, true
}
