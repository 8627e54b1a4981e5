package ledger

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// WatchedBatch is a batch with a budget or a pause that is not settled, as
// the metrics' batch gauges report it.
type WatchedBatch struct {
	ID string
	// Budget is nil for a batch without a cap (reported only while paused).
	Budget *float64
	// Spent is what the per-call budget check reads (batchSpentSQL).
	Spent float64
	// State is stateSQL's, the rule `triage status` uses.
	State BatchState
}

// watchedBatchesQuery selects the batches with a budget or a pause that are
// not settled, by BatchStatus's rule: completed (stored results) plus
// dead-lettered (live dead letters) below total. Only those batches are
// counted, each by two indexed counts (triage_result's primary key and
// triage_dead_letter's live index), so a ledger of plain batches costs one
// scan of triage_batch; ListBatches would aggregate every batch's results
// and attempts on every scrape.
const watchedBatchesQuery = `
SELECT id, budget_usd, spent_usd, state FROM (
    SELECT b.id, b.budget_usd::float8 AS budget_usd, ` + batchSpentSQL + `::float8 AS spent_usd, ` + stateSQL + ` AS state,
           b.total,
           (SELECT count(*) FROM triage_result r WHERE r.batch = b.id)
         + (SELECT count(*) FROM triage_dead_letter d WHERE d.batch = b.id AND d.requeued_at IS NULL) AS done
    FROM triage_batch b
) w
WHERE (budget_usd IS NOT NULL OR state <> 'running') AND done < total
ORDER BY id`

// WatchedBatches reads the unsettled batches with a budget or a pause, by
// id: what a scrape of the metrics reports of batches.
func WatchedBatches(ctx context.Context, db DBTX) ([]WatchedBatch, error) {
	rows, err := db.Query(ctx, watchedBatchesQuery)
	if err != nil {
		return nil, fmt.Errorf("ledger: watched batches: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WatchedBatch, error) {
		var b WatchedBatch
		err := r.Scan(&b.ID, &b.Budget, &b.Spent, &b.State)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: watched batches: %w", err)
	}
	return out, nil
}
