package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
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
	err := db.QueryRow(ctx, `SELECT now(),
		coalesce(array_agg(coalesce(attempted_at, now()) ORDER BY attempted_at) FILTER (WHERE state = 'running'), '{}'),
		count(*) FILTER (WHERE state <> 'running')
		FROM `+rivertable.Job(schema)+` WHERE kind = $1 AND args @> jsonb_build_object('batch', $2::text)
		  AND state IN ('available', 'pending', 'running', 'scheduled', 'retryable')`, Kind, batch).
		Scan(&out.Now, &out.RunningSince, &out.Queued)
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
