package worker

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/rivertable"
)

// JobsLeft counts the River jobs of the named keys' queues and probe queues
// (keys.QueueName, keys.ProbeQueueName) that are not finished: available,
// pending, running, scheduled or retryable, leaving out those of batches
// paused at their spend cap. `triage work --exit-when-idle` stops at zero.
// schema is River's (Options.Schema; "" for the search_path).
func JobsLeft(ctx context.Context, pool *pgxpool.Pool, schema string, keyNames []string) (int, error) {
	queues := make([]string, 0, 2*len(keyNames))
	for _, k := range keyNames {
		queues = append(queues, keys.QueueName(k), keys.ProbeQueueName(k))
	}
	var n int
	// Jobs of a batch paused at its spend cap wait for a human (`triage batch
	// budget`), not for this process: they do not keep it busy.
	err := pool.QueryRow(ctx, `SELECT count(*) FROM `+rivertable.Job(schema)+` j
		WHERE j.queue = ANY($1) AND j.state IN ('available', 'pending', 'running', 'scheduled', 'retryable')
		  AND NOT EXISTS (SELECT 1 FROM triage_batch b WHERE b.id = j.args->>'batch' AND b.state = 'paused_budget')`, queues).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count jobs left: %w", err)
	}
	return n, nil
}

// WakeBatch makes a batch's snoozed jobs available now, so that raising a
// batch's budget (or resuming it by hand) takes effect at once rather than
// when each parked job's snooze ends. Only snoozed (scheduled) jobs are
// touched: jobs waiting on a retry backoff are retryable and keep their
// backoff. A job woken while its key is still paused simply parks again.
// River has no bulk "run now" for a set of jobs, so this updates river_job
// directly, as River's own JobRetry does for one job. schema is River's
// (Options.Schema; "" for the search_path).
func WakeBatch(ctx context.Context, db ledger.DBTX, schema, batch string) (int, error) {
	tag, err := db.Exec(ctx, `UPDATE `+rivertable.Job(schema)+` SET state = 'available', scheduled_at = now()
		WHERE state = 'scheduled' AND kind = $1 AND args->>'batch' = $2`, Kind, batch)
	if err != nil {
		return 0, fmt.Errorf("wake batch %q: %w", batch, err)
	}
	return int(tag.RowsAffected()), nil
}

// WakeKey is WakeBatch for every snoozed job in a key's queue, for a key
// resumed by hand.
func WakeKey(ctx context.Context, db ledger.DBTX, schema, key string) (int, error) {
	tag, err := db.Exec(ctx, `UPDATE `+rivertable.Job(schema)+` SET state = 'available', scheduled_at = now()
		WHERE state = 'scheduled' AND kind = $1 AND queue = $2`, Kind, keys.QueueName(key))
	if err != nil {
		return 0, fmt.Errorf("wake key %q: %w", key, err)
	}
	return int(tag.RowsAffected()), nil
}
