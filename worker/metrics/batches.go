package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
)

// batchGauges is one batch the batch gauges report.
type batchGauges struct {
	id string
	// budget is nil for a batch without a cap (reported only while paused).
	budget *float64
	spent  float64
	state  ledger.BatchState
}

// watchedBatchesQuery selects the batches with a budget or a pause that are
// not settled, by ledger.BatchStatus's rule: completed (stored results) plus
// dead-lettered (live dead letters) below total. Only those batches are
// counted, each by two indexed counts (triage_result's primary key and
// triage_dead_letter's live index), so a ledger of plain batches costs one
// scan of triage_batch; ledger.ListBatches would aggregate every batch's
// results and attempts on every scrape. budget_usd and spent_usd are what
// the per-call budget check reads. The state is ledger.StateSQL's,
// the rule `triage status` uses.
const watchedBatchesQuery = `
SELECT id, budget_usd, spent_usd, state FROM (
    SELECT b.id, b.budget_usd::float8 AS budget_usd, ` + ledger.BatchSpentSQL + `::float8 AS spent_usd, ` + ledger.StateSQL + ` AS state,
           b.total,
           (SELECT count(*) FROM triage_result r WHERE r.batch = b.id)
         + (SELECT count(*) FROM triage_dead_letter d WHERE d.batch = b.id AND d.requeued_at IS NULL) AS done
    FROM triage_batch b
) w
WHERE (budget_usd IS NOT NULL OR state <> 'running') AND done < total
ORDER BY id`

func readBatches(ctx context.Context, db ledger.DBTX) ([]batchGauges, error) {
	rows, err := db.Query(ctx, watchedBatchesQuery)
	if err != nil {
		return nil, fmt.Errorf("metrics: batches: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (batchGauges, error) {
		var b batchGauges
		err := r.Scan(&b.id, &b.budget, &b.spent, &b.state)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("metrics: batches: %w", err)
	}
	return out, nil
}

// paused reports whether the batch is in a paused state.
func (b batchGauges) paused() bool {
	return b.state == ledger.BatchPausedBudget || b.state == ledger.BatchPausedExhausted
}

// retryGauges is one key's fleet retry budget, as the worker's check sees it.
type retryGauges struct {
	key           string
	open, allowed float64
}

// readRetry reads a key's retry budget as the worker's check does: open
// retries over rb's window up to now, against rb.Allowed.
func readRetry(ctx context.Context, db ledger.DBTX, rb decide.RetryBudget, key string, budget float64, now time.Time) (retryGauges, error) {
	u, err := ledger.RetryUsageByKey(ctx, db, key, rb.Since(now))
	if err != nil {
		return retryGauges{}, err
	}
	return retryGauges{
		key:     key,
		open:    float64(u.OpenRetries),
		allowed: float64(rb.Allowed(budget, u.FirstCalls)),
	}, nil
}
