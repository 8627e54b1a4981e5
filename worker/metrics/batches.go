package metrics

import (
	"context"
	"fmt"
	"time"

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

// readBatches reads the batches the batch gauges report:
// ledger.WatchedBatches, the unsettled ones with a budget or a pause.
func readBatches(ctx context.Context, db ledger.DBTX) ([]batchGauges, error) {
	ws, err := ledger.WatchedBatches(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("metrics: batches: %w", err)
	}
	out := make([]batchGauges, len(ws))
	for i, w := range ws {
		out[i] = batchGauges{id: w.ID, budget: w.Budget, spent: w.Spent, state: w.State}
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
