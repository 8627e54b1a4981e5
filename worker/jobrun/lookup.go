package jobrun

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/tidwall/gjson"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
)

// metaLookup keeps, in the job's metadata, since when the job has been
// looking for its current lost call: {"n": unanswered calls, "since": unix
// ms}. A new lost call (n changes) starts a new wait.
const metaLookup = "triage_lookup"

// lookupRecheckMax caps the park between two look-ups of a lost call.
const lookupRecheckMax = 2 * time.Second

// lookupStored asks the key's provider store for the job's lost call (policy
// lookup) and fills b.Lookup; a found answer becomes the call's result
// (c.res, c.verdict, c.output). A store that cannot be asked counts as not
// found this time: the job parks and asks again within lookup_wait.
func (r *Runner) lookupStored(ctx context.Context, c *call, b *decide.BeforeCall, jobAmbiguous int) {
	k := c.key
	wait := k.cfg.LookupWait
	b.Lookup = decide.Lookup{Asked: true, Wait: wait, Recheck: min(max(wait/10, 100*time.Millisecond), lookupRecheckMax)}
	res, n, err := k.client.Lookup(ctx, c.req.IdempotencyKey)
	if err != nil {
		r.log.WarnContext(ctx, "look-up of a lost call failed", "key", k.cfg.Name, "job_id", c.job.ID, "err", err)
	}
	if err == nil && n > 0 {
		b.Lookup.Found = true
		c.res, c.verdict = res, classify.Verdict{Class: classify.OK, Known: true}
		c.output, b.Lookup.Unusable = usableOutput(c)
		r.log.InfoContext(ctx, "lost call found by look-up: its stored answer is the result, billed once",
			"key", k.cfg.Name, "job_id", c.job.ID, "record_id", c.job.Args.RecordID, "stored", n)
		return
	}
	now := r.now()
	since := now
	if m := gjson.GetBytes(c.job.Metadata, metaLookup); m.Exists() && int(m.Get("n").Int()) == jobAmbiguous {
		since = time.UnixMilli(m.Get("since").Int())
	} else {
		_ = river.MetadataSet(ctx, metaLookup, map[string]int64{"n": int64(jobAmbiguous), "since": now.UnixMilli()})
	}
	b.Lookup.Waited = now.Sub(since)
}

// completeFound settles the lost call's attempt as billed once, with the
// stored answer's usage and cost, stores the answer and completes the job,
// in one transaction (completeOnce).
func (r *Runner) completeFound(ctx context.Context, c *call) error {
	c.found = true
	return r.complete(ctx, c)
}

// settleFound is completeOnce's part for a found call.
func (r *Runner) settleFound(ctx context.Context, tx pgx.Tx, c *call) error {
	o := r.outcome(c, ledger.AttemptOK)
	id, err := ledger.SettleFound(ctx, tx, c.req.IdempotencyKey, c.job.ID, o)
	if err != nil {
		return err
	}
	c.attemptID = id
	return r.storeResult(ctx, tx, c)
}
