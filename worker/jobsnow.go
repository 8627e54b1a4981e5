package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/rivertable"
)

// BatchJobsNow is what River's table says of a batch's unfinished jobs, for
// `triage status B` to say what is happening now.
type BatchJobsNow struct {
	// RunningSince is when each running job's current run began (River's
	// attempted_at), oldest first.
	RunningSince []time.Time
	// Queued counts the jobs available, pending, scheduled or retryable.
	Queued int
	// Now is the database's clock when it was read.
	Now time.Time
}

// BatchJobsRunning reads the batch's running jobs' start times and counts
// its queued ones. schema is River's ("" for the search_path).
func BatchJobsRunning(ctx context.Context, db ledger.DBTX, schema, batch string) (BatchJobsNow, error) {
	var out BatchJobsNow
	var err error
	out.Now, out.RunningSince, out.Queued, err = rivertable.BatchRunning(ctx, db, schema, jobargs.Kind, batch)
	if err != nil {
		return BatchJobsNow{}, fmt.Errorf("read the running jobs of batch %q: %w", batch, err)
	}
	return out, nil
}

// ConfigHorizon is the horizon a worker process started with cfg and the
// default options gives River (Options.JobMargin and Options.RescueAfter
// unset): how long a job left running by a process that died waits for
// River's rescuer.
func ConfigHorizon(cfg *config.Config) Horizon {
	return fleetHorizon(cfg, JobMarginDefault, 0)
}

// PausedBatchJobs counts, by batch, the queued jobs of the named keys'
// queues whose batch is paused by hand: what `triage work --exit-when-idle`
// leaves behind (JobsLeft does not count them) and must name. schema is
// River's ("" for the search_path).
func PausedBatchJobs(ctx context.Context, pool *pgxpool.Pool, schema string, keyNames []string) (map[string]int, error) {
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
