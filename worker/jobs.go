package worker

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/worker/keys"
)

// JobsLeft counts the River jobs of the named keys' queues and probe queues
// (keys.QueueName, keys.ProbeQueueName) that are not finished: available,
// pending, running, scheduled or retryable. `triage work --exit-when-idle`
// stops at zero. River's tables are found through the pool's search_path.
func JobsLeft(ctx context.Context, pool *pgxpool.Pool, keyNames []string) (int, error) {
	queues := make([]string, 0, 2*len(keyNames))
	for _, k := range keyNames {
		queues = append(queues, keys.QueueName(k), keys.ProbeQueueName(k))
	}
	var n int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job
		WHERE queue = ANY($1) AND state IN ('available', 'pending', 'running', 'scheduled', 'retryable')`, queues).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count jobs left: %w", err)
	}
	return n, nil
}
