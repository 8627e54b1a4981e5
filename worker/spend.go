package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
)

// Prepaid thresholds, each alerted once per key, fleet-wide.
var prepaidThresholds = []struct {
	share float64
	kind  keys.AlertKind
}{
	{0.70, keys.AlertPrepaid70},
	{0.90, keys.AlertKind("prepaid_90")},
}

// watchSpend evaluates the prepaid and spend-rate alerts from the ledger,
// and dead-letters jobs River discarded, every SpendCheck until ctx ends. Every process runs it; ledger.ClaimOnce
// makes each alert fire once for the fleet.
func (r *Runtime) watchSpend(ctx context.Context) {
	for {
		r.checkSpend(ctx)
		r.sweepDiscarded(ctx)
		d := r.opts.SpendCheck
		select {
		case <-ctx.Done():
			return
		case <-time.After(d*4/5 + rand.N(d*2/5+1)):
		}
	}
}

func (r *Runtime) checkSpend(ctx context.Context) {
	now := r.now()
	for name, k := range r.keys {
		if k.cfg.PrepaidUSD > 0 {
			spent, err := ledger.SpendByKey(ctx, r.pool, name, time.Time{})
			if err != nil {
				r.log.WarnContext(ctx, "prepaid check", "key", name, "err", err)
				continue
			}
			for _, th := range prepaidThresholds {
				if spent < th.share*k.cfg.PrepaidUSD {
					continue
				}
				r.alertOnce(ctx, name, string(th.kind), keys.Alert{Kind: th.kind, Key: name,
					Message: fmt.Sprintf("%.0f %% of the prepaid balance spent", 100*spent/k.cfg.PrepaidUSD),
					Fields:  map[string]any{"spent_usd": spent, "prepaid_usd": k.cfg.PrepaidUSD}})
			}
		}
		if limit := r.cfg.Alerts.MaxUSDPerHour; limit > 0 {
			spent, err := ledger.SpendByKey(ctx, r.pool, name, now.Add(-time.Hour))
			if err != nil {
				r.log.WarnContext(ctx, "spend-rate check", "key", name, "err", err)
				continue
			}
			if spent > limit {
				// Once per clock hour: a sustained overspend alerts again
				// the next hour, not on every check.
				bucket := "spend_rate:" + now.UTC().Format("2006-01-02T15")
				r.alertOnce(ctx, name, bucket, keys.Alert{Kind: keys.AlertSpendRate, Key: name,
					Message: fmt.Sprintf("spent $%.2f in the last hour, over alerts.max_usd_per_hour $%.2f", spent, limit),
					Fields:  map[string]any{"spent_usd_last_hour": spent, "max_usd_per_hour": limit}})
			}
		}
	}
}

func (r *Runtime) alertOnce(ctx context.Context, key, kind string, a keys.Alert) {
	first, err := ledger.ClaimOnce(ctx, r.pool, key, kind)
	if err != nil {
		r.log.WarnContext(ctx, "alert claim", "key", key, "kind", kind, "err", err)
		return
	}
	if first {
		r.alerter.Alert(ctx, a)
	}
}

// ReasonDiscarded is the dead-letter reason of a job River gave up on by
// itself (its runs kept failing for the worker's own reasons, or it was
// rescued after a crash on its last attempt).
const ReasonDiscarded = "discarded"

// sweepDiscarded dead-letters triage jobs River discarded whose record has
// neither a result nor a dead letter, so every record ends somewhere a human
// looks and every batch can settle. AttemptHeadroom makes this rare.
func (r *Runtime) sweepDiscarded(ctx context.Context) {
	rows, err := r.pool.Query(ctx, `SELECT j.id, j.args, j.attempt,
			coalesce(j.errors[array_length(j.errors, 1)]->>'error', '')
		FROM river_job j
		WHERE j.kind = $1 AND j.state = 'discarded'
		  AND NOT EXISTS (SELECT 1 FROM triage_result t
			WHERE t.batch = j.args->>'batch' AND t.record_id = j.args->>'record_id')
		  AND NOT EXISTS (SELECT 1 FROM triage_dead_letter d
			WHERE d.batch = j.args->>'batch' AND d.record_id = j.args->>'record_id'
			  AND (d.requeued_at IS NULL OR d.job_id = j.id))
		LIMIT 100`, Kind)
	if err != nil {
		r.log.WarnContext(ctx, "sweep discarded jobs", "err", err)
		return
	}
	type discarded struct {
		id      int64
		args    Args
		attempt int
		lastErr string
	}
	var found []discarded
	for rows.Next() {
		var d discarded
		var raw []byte
		if err := rows.Scan(&d.id, &raw, &d.attempt, &d.lastErr); err != nil {
			r.log.WarnContext(ctx, "sweep discarded jobs", "err", err)
			rows.Close()
			return
		}
		if json.Unmarshal(raw, &d.args) == nil {
			found = append(found, d)
		}
	}
	rows.Close()
	for _, d := range found {
		row := ledger.DeadLetterRow{
			Batch: d.args.Batch, RecordID: d.args.RecordID, JobID: d.id, Pipeline: d.args.Pipeline,
			Class: classify.Transient, Reason: ReasonDiscarded, Attempts: d.attempt, Request: d.args.Record,
			ErrorExcerpt: "River discarded the job after its last attempt; last error: " + d.lastErr,
		}
		if p, err := r.cfg.Pipeline(d.args.Pipeline); err == nil {
			if k, _, err := r.cfg.KeyFor(p.Name); err == nil {
				row.Key = k.Name
			}
		}
		if id, err := ledger.AddDeadLetter(ctx, r.pool, row); err != nil {
			r.log.WarnContext(ctx, "dead-letter a discarded job", "job_id", d.id, "err", err)
		} else {
			r.log.WarnContext(ctx, "dead letter", "dead_letter_id", id, "batch", d.args.Batch, "record_id", d.args.RecordID,
				"class", "transient", "reason", ReasonDiscarded, "job_id", d.id)
		}
	}
}
