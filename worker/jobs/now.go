package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/rivertable"
)

// BatchNow is what River's table says of a batch's unfinished jobs, for
// `triage status B` to say what is happening now.
type BatchNow struct {
	// RunningSince is when each running job's current run began (River's
	// attempted_at), oldest first.
	RunningSince []time.Time
	// Queued counts the jobs available, pending, scheduled or retryable.
	Queued int
	// Now is the database's clock when it was read.
	Now time.Time
}

// BatchRunning reads the batch's running jobs' start times and counts
// its queued ones. schema is River's ("" for the search_path).
func BatchRunning(ctx context.Context, db ledger.DBTX, schema, batch string) (BatchNow, error) {
	var out BatchNow
	var err error
	out.Now, out.RunningSince, out.Queued, err = rivertable.BatchRunning(ctx, db, schema, jobargs.Kind, batch)
	if err != nil {
		return BatchNow{}, fmt.Errorf("read the running jobs of batch %q: %w", batch, err)
	}
	return out, nil
}

// OfPausedBatches counts, by batch, the queued jobs of the named keys'
// queues whose batch is paused by hand: what `triage work --exit-when-idle`
// leaves behind (Left does not count them) and must name. schema is
// River's ("" for the search_path).
func OfPausedBatches(ctx context.Context, pool *pgxpool.Pool, schema string, keyNames []string) (map[string]int, error) {
	queues := make([]string, 0, len(keyNames))
	for _, k := range keyNames {
		queues = append(queues, keys.QueueName(k))
	}
	out, err := rivertable.CountOfPausedBatches(ctx, pool, schema, jobargs.Kind, queues)
	if err != nil {
		return nil, fmt.Errorf("count the jobs of paused batches: %w", err)
	}
	return out, nil
}
