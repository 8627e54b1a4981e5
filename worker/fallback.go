package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/provider"
	"github.com/triage-dev/triage/worker/rivertable"
)

// need is what request r asks of a model (decide.Capable).
func need(r provider.Request) decide.Need {
	return decide.Need{InputTokens: r.EstimatedTokens(), MaxTokens: r.MaxTokens, JSON: r.JSON}
}

// moveJob moves job id (on queue from) to model m's key queue and counts
// the move against the batch's fallback_max_share, in one transaction: the
// count and the move land together or not at all. With a share, the
// batch's row is locked first (ledger.FallbackRoom), so two moves at once
// cannot both take the last place under it; the lock order (batch, then
// job) is that of a job's completion. share <= 0 is no bound; only a job
// leaving its own model (a.Model "") is counted. states: the states the
// job may be in (running for a job moving itself, available or scheduled
// for the mover). It returns false when the share refused it, the job was
// no longer there, or it holds an open line (checked in the move's
// statement: rivertable.MoveToModel). line is the job's open line as its
// caller read it: an unsent one is taken back in the same transaction as
// the move; one that went into a provider batch meanwhile keeps the job
// where it is.
func (r *Runtime) moveJob(ctx context.Context, id int64, a jobargs.Args, from string, m *config.Model, share float64, states []string, line ledger.BatchLine) (bool, error) {
	count := a.Model == ""
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if line.Hold() == ledger.HoldUnsent {
			took, err := ledger.TakeBackBatchLine(ctx, tx, line.ID, line.AttemptID)
			if err != nil || !took {
				if err == nil {
					err = errNotMoved // sent meanwhile: it stays
				}
				return err
			}
		}
		if count && share > 0 {
			room, err := ledger.FallbackRoom(ctx, tx, a.Batch, share)
			if err != nil {
				return err
			}
			if !room {
				return errNotMoved
			}
		}
		moved, err := rivertable.MoveToModel(ctx, tx, r.opts.Schema, id, from, keys.QueueName(m.Key), m.Name, states)
		if err != nil {
			return err
		}
		if !moved {
			// Nothing moved: a line taken back stays the job's.
			return errNotMoved
		}
		if count {
			return ledger.CountFallback(ctx, tx, a.Batch)
		}
		return nil
	})
	if errors.Is(err, errNotMoved) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("move job %d to fallback %q: %w", id, m.Name, err)
	}
	return true, nil
}

var errNotMoved = errors.New("not moved")

// applyFallback carries out a decide.ReactFallback for the running job: it moves
// to the fallback's key queue and runs there at once (a park that charges
// no snooze). Refused by fallback_max_share, the job reacts as it would
// have without a fallback.
func (r *Runtime) applyFallback(ctx context.Context, c *call, rx decide.Reaction) error {
	job, mv := c.job, rx.Fallback
	ok, err := r.moveJob(context.WithoutCancel(ctx), job.ID, job.Args, job.Queue, mv.Model, c.pipeline.FallbackMaxShare, []string{"running"}, c.line)
	if err != nil {
		return err
	}
	if !ok {
		return r.apply(ctx, c, mv.Otherwise, keys.Report{})
	}
	_ = r.finish(ctx, c, attemptStatus(rx.Outcome))
	r.log.InfoContext(ctx, "fallback", "job_id", job.ID, "batch", job.Args.Batch, "record_id", job.Args.RecordID,
		"from_model", c.model.Name, "to_model", mv.Model.Name, "to_key", mv.Model.Key)
	return park(ctx, job, time.Millisecond)
}

// metaNoFallback marks a job the mover found no capable fallback for, with
// the opening of the breaker it looked under, so it is looked at once per
// opening, not every tick.
const metaNoFallback = "triage_no_fallback"

// fallbackTickDefault is how often the mover looks at the keys whose
// breaker is open.
const fallbackTickDefault = time.Second

// watchFallbacks moves the queued jobs of keys whose breaker has been open
// longer than their pipeline's fallback_grace to their first capable
// fallback. Those jobs are not fetched (the key's queue is paused), so no
// run of theirs could decide it: the mover asks decide.Before on their
// behalf. Jobs no fallback can serve stay where they are, parked.
func (r *Runtime) watchFallbacks(ctx context.Context) {
	if !slices.ContainsFunc(r.cfg.Pipelines, func(p config.Pipeline) bool { return len(p.Fallback) > 0 }) {
		return
	}
	tick := r.opts.SupervisorTick
	if tick <= 0 {
		tick = fallbackTickDefault
	}
	for {
		for name := range r.keys {
			if err := r.moveFallbacks(ctx, name); err != nil && ctx.Err() == nil {
				r.log.WarnContext(ctx, "fallback mover", "key", name, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(decide.Jitter(tick, 0.8, 1.2)):
		}
	}
}

// moverBatch is how many of a key's jobs one tick of the mover looks at.
const moverBatch = 500

func (r *Runtime) moveFallbacks(ctx context.Context, key string) error {
	st, err := r.store.KeyStatus(ctx, key)
	if err != nil {
		return err
	}
	breaker, opened := keys.BreakerExhausted, st.OpenedAt
	if st.State == keys.StateClosed || opened == nil {
		breaker, opened = keys.BreakerStorm, st.Storm.OpenedAt
		if st.Storm.State == keys.StateClosed || opened == nil {
			return nil
		}
	}
	openFor := st.Now.Sub(*opened)
	marker := breaker.String() + ":" + opened.UTC().Format(time.RFC3339Nano)
	queue := keys.QueueName(key)
	found, err := rivertable.ListQueued(ctx, r.pool, r.opts.Schema, queue, jobargs.Kind, metaNoFallback, marker, moverBatch)
	if err != nil {
		return fmt.Errorf("list queued jobs: %w", err)
	}
	type queued struct {
		job  river.Job[jobargs.Args]
		args []byte
	}
	jobs := make([]queued, len(found))
	for i, f := range found {
		jobs[i] = queued{job: river.Job[jobargs.Args]{JobRow: &rivertype.JobRow{ID: f.ID, Attempt: f.Attempt, CreatedAt: f.CreatedAt, Metadata: f.Metadata}}, args: f.Args}
	}
	ids := make([]int64, len(jobs))
	for i, q := range jobs {
		ids[i] = q.job.ID
	}
	lines, err := ledger.OpenBatchLines(ctx, r.pool, ids)
	if err != nil {
		return err
	}
	var skip []int64 // no capable fallback, or no room under the share
	for _, q := range jobs {
		if err := json.Unmarshal(q.args, &q.job.Args); err != nil {
			continue
		}
		p, m, _, err := r.lookup(q.job.Args)
		if err != nil || len(p.Fallback) == 0 {
			continue
		}
		c := &call{job: &q.job, pipeline: p, model: m}
		if rx := c.render(); rx.Kind != decide.ReactGo {
			continue // its own run dead-letters it
		}
		adm := keys.Admission{Breaker: breaker}
		fb := decide.FallbackFacts{Model: decide.FirstCapable(r.cfg, p, m.Name, need(c.req)), OpenFor: &openFor, Grace: p.FallbackGrace}
		line := lines[q.job.ID]
		rx := decide.Before(decide.BeforeCall{MaxAttempts: p.MaxAttempts, MaxSnoozes: p.MaxSnoozes, Admission: admissionFacts(adm), Fallback: fb, Line: lineFacts(line.Hold())})
		switch {
		case rx.Kind == decide.ReactFallback:
			ok, err := r.moveJob(ctx, q.job.ID, q.job.Args, queue, rx.Fallback.Model, p.FallbackMaxShare, []string{"available", "scheduled"}, line)
			if err != nil {
				return err
			}
			if !ok {
				// fallback_max_share reached (the count never goes down):
				// not again under this opening. Without a share, the job
				// was fetched meanwhile (a run, the key's probe, which
				// gives it back) or took a line: looked at again next tick.
				if p.FallbackMaxShare > 0 {
					skip = append(skip, q.job.ID)
				}
				continue
			}
			r.log.InfoContext(ctx, "fallback", "job_id", q.job.ID, "batch", q.job.Args.Batch, "record_id", q.job.Args.RecordID,
				"from_model", m.Name, "to_model", rx.Fallback.Model.Name, "to_key", rx.Fallback.Model.Key, "breaker", breaker.String())
		case fb.Model == nil:
			skip = append(skip, q.job.ID)
		}
	}
	if len(skip) > 0 {
		if err := rivertable.MarkQueued(ctx, r.pool, r.opts.Schema, skip, metaNoFallback, marker); err != nil {
			return fmt.Errorf("mark jobs without a capable fallback: %w", err)
		}
	}
	return nil
}
