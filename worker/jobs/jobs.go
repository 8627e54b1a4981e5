// Package jobs is what the CLI, the web window and a worker process ask of
// triage's jobs in River, batch by batch or key by key: how many are left,
// which run now, cancelling, deleting and waking them. The statements are
// worker/rivertable's; this package names the job kind and the key's
// queues, and wraps the errors with what was asked.
package jobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/rivertable"
)

// Left counts the River jobs of the named keys' queues and probe queues
// (keys.QueueName, keys.ProbeQueueName) that are not finished: available,
// pending, running, scheduled or retryable, leaving out those of batches
// paused at their spend cap or by hand. `triage work --exit-when-idle` stops
// at zero.
// schema is River's (Options.Schema; "" for the search_path).
func Left(ctx context.Context, pool *pgxpool.Pool, schema string, keyNames []string) (int, error) {
	queues := make([]string, 0, 2*len(keyNames))
	for _, k := range keyNames {
		queues = append(queues, keys.QueueName(k), keys.ProbeQueueName(k))
	}
	// Jobs of a batch paused at its spend cap wait for a human (`triage batch
	// budget`), not for this process: they do not keep it busy.
	n, err := rivertable.CountLeft(ctx, pool, schema, queues)
	if err != nil {
		return 0, fmt.Errorf("count jobs left: %w", err)
	}
	return n, nil
}

// CancelQueued cancels, for `triage batch cancel`, the batch's River
// jobs that are queued (available, pending, scheduled or retryable) and
// whose record has no answer on its way (no line in a provider batch or
// answered), and returns their records for their dead letters. Running jobs
// are left to finish their call: each reads the cancel before its next one.
// Call it in the cancel's transaction, after ledger.TakeBackBatchLines: a
// job River fetches meanwhile is skipped (the update re-checks its state).
func CancelQueued(ctx context.Context, db ledger.DBTX, schema, batch string) ([]ledger.CancelledRecord, error) {
	jobs, err := rivertable.CancelQueued(ctx, db, schema, jobargs.Kind, batch)
	if err != nil {
		return nil, fmt.Errorf("cancel the queued jobs of batch %q: %w", batch, err)
	}
	out := make([]ledger.CancelledRecord, len(jobs))
	for i, j := range jobs {
		out[i] = ledger.CancelledRecord{JobID: j.JobID, RecordID: j.RecordID, Pipeline: j.Pipeline, Record: j.Record, Attempts: j.Attempts}
	}
	return out, nil
}

// BatchLive counts the batch's River jobs not finished, running ones
// apart: for `triage batch cancel` to say what is still in flight, and for
// `triage batch delete` to refuse a batch that still has jobs.
func BatchLive(ctx context.Context, db ledger.DBTX, schema, batch string) (running, queued int, err error) {
	running, queued, err = rivertable.CountBatchLive(ctx, db, schema, jobargs.Kind, batch)
	if err != nil {
		return 0, 0, fmt.Errorf("count the live jobs of batch %q: %w", batch, err)
	}
	return running, queued, nil
}

// DeleteBatch deletes the batch's finished River jobs, for `triage
// batch delete` (after BatchLive found none live): a finished job of a
// deleted batch must not read as an orphan to the sweep.
func DeleteBatch(ctx context.Context, db ledger.DBTX, schema, batch string) (int, error) {
	n, err := rivertable.DeleteFinished(ctx, db, schema, jobargs.Kind, batch)
	if err != nil {
		return 0, fmt.Errorf("delete the jobs of batch %q: %w", batch, err)
	}
	return n, nil
}

// WakeBatch makes a batch's snoozed jobs available now, so that raising a
// batch's budget (or resuming it by hand) takes effect at once rather than
// when each parked job's snooze ends. Only snoozed (scheduled) jobs are
// touched: jobs waiting on a retry backoff are retryable and keep their
// backoff. A job woken while its key is still paused simply parks again.
// River has no bulk "run now" for a set of jobs (rivertable.WakeBatch).
// schema is River's (Options.Schema; "" for the search_path).
func WakeBatch(ctx context.Context, db ledger.DBTX, schema, batch string) (int, error) {
	n, err := rivertable.WakeBatch(ctx, db, schema, jobargs.Kind, batch)
	if err != nil {
		return 0, fmt.Errorf("wake batch %q: %w", batch, err)
	}
	return n, nil
}

// WakeKey is WakeBatch for every snoozed job in a key's queue, for a key
// resumed by hand.
func WakeKey(ctx context.Context, db ledger.DBTX, schema, key string) (int, error) {
	n, err := rivertable.WakeQueue(ctx, db, schema, jobargs.Kind, keys.QueueName(key))
	if err != nil {
		return 0, fmt.Errorf("wake key %q: %w", key, err)
	}
	return n, nil
}
