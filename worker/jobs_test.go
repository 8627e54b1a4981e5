package worker_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/jobs"
	"github.com/triage-dev/triage/worker/keys"
)

// jobsConfig has two keys, each with a pipeline; nothing is ever called.
const jobsConfig = `
[[keys]]
name = "a"
vendor = "openai"
base_url = "http://127.0.0.1:1/v1"
api_key_env = "UNUSED"

[[keys]]
name = "b"
vendor = "openai"
base_url = "http://127.0.0.1:1/v1"
api_key_env = "UNUSED"

[[models]]
name = "ma"
key = "a"

[[models]]
name = "mb"
key = "b"

[[pipelines]]
name = "pa"
model = "ma"
prompt = "{{json .}}"

[[pipelines]]
name = "pb"
model = "mb"
prompt = "{{json .}}"
`

func TestJobsLeft(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := dbtest.New(t)
	cfg, err := config.Parse([]byte(jobsConfig), "jobs.toml")
	require.NoError(t, err)
	enqueue := func(pipeline, batch, jsonl string) {
		t.Helper()
		recs, err := enqueue.ReadJSONL(strings.NewReader(jsonl), batch+".jsonl")
		require.NoError(t, err)
		require.NoError(t, enqueue.Batch(ctx, db.Pool, db.Schema, cfg,
			enqueue.Params{Pipeline: pipeline, Batch: batch, Records: recs}))
	}
	enqueue("pa", "ba", "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n")
	enqueue("pb", "bb", "{\"n\":1}\n{\"n\":2}\n")

	left := func(names ...string) int {
		t.Helper()
		n, err := jobs.Left(ctx, db.Pool, db.Schema, names)
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 3, left("a"))
	require.Equal(t, 2, left("b"))
	require.Equal(t, 5, left("a", "b"))
	require.Equal(t, 0, left("c"), "a key with no queue")
	require.Equal(t, 0, left(), "no keys")

	// A probe job counts; finished jobs (completed, cancelled, discarded) do not.
	_, err = db.Pool.Exec(ctx, `UPDATE river_job SET queue = $1, state = 'scheduled' WHERE id = (SELECT min(id) FROM river_job WHERE queue = $2)`,
		keys.ProbeQueueName("a"), keys.QueueName("a"))
	require.NoError(t, err)
	require.Equal(t, 3, left("a"))
	_, err = db.Pool.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE queue = $1`, keys.QueueName("a"))
	require.NoError(t, err)
	require.Equal(t, 1, left("a"), "only the probe job is left")
	_, err = db.Pool.Exec(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = now() WHERE queue = $1`, keys.ProbeQueueName("a"))
	require.NoError(t, err)
	require.Equal(t, 0, left("a"))
	require.Equal(t, 2, left("a", "b"))
}

// Raising a budget or resuming a key wakes exactly the snoozed jobs of that
// batch or key; jobs waiting on a retry backoff keep their backoff.
func TestWakeBatchAndKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := dbtest.New(t)
	cfg, err := config.Parse([]byte(jobsConfig), "jobs.toml")
	require.NoError(t, err)
	for _, b := range []struct{ pipeline, batch string }{{"pa", "a1"}, {"pa", "a2"}, {"pb", "b1"}} {
		recs, err := enqueue.ReadJSONL(strings.NewReader("{\"n\":1}\n{\"n\":2}\n"), b.batch+".jsonl")
		require.NoError(t, err)
		require.NoError(t, enqueue.Batch(ctx, db.Pool, db.Schema, cfg, enqueue.Params{Pipeline: b.pipeline, Batch: b.batch, Records: recs}))
	}
	// Every job snoozed an hour, except one of a1 waiting on a retry backoff.
	_, err = db.Pool.Exec(ctx, `UPDATE river_job SET state = 'scheduled', scheduled_at = now() + interval '1 hour'`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `UPDATE river_job SET state = 'retryable' WHERE id = (SELECT min(id) FROM river_job WHERE args->>'batch' = 'a1')`)
	require.NoError(t, err)
	available := func(batch string) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'available' AND args->>'batch' = $1 AND scheduled_at <= now()`, batch).Scan(&n))
		return n
	}

	n, err := jobs.WakeBatch(ctx, db.Pool, db.Schema, "a1")
	require.NoError(t, err)
	require.Equal(t, 1, n, "the snoozed job, not the one in backoff")
	require.Equal(t, 1, available("a1"))
	require.Zero(t, available("a2"))

	n, err = jobs.WakeKey(ctx, db.Pool, db.Schema, "b")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, 2, available("b1"))
	require.Zero(t, available("a2"), "another key's jobs are untouched")
}
