package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/jobs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/rivertable"
	"github.com/triage-dev/triage/worker/sweep"
	"github.com/triage-dev/triage/worker/workertest"
)

// riverSchema gives db a second schema holding only River's tables, off the
// pool's search_path. The test schema keeps River tables of its own, empty
// for the test's jobs: a statement that forgets Options.Schema reads those
// and finds nothing, rather than failing loudly.
func riverSchema(t *testing.T, db *dbtest.DB) string {
	t.Helper()
	ctx := context.Background()
	schema := db.Schema + "_river"
	_, err := db.Pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = db.Pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	m, err := rivermigrate.New(riverpgxv5.New(db.Pool), &rivermigrate.Config{Schema: schema})
	require.NoError(t, err)
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	return schema
}

// jobs.Left, jobs.WakeBatch and jobs.WakeKey reach River's tables in Options.Schema.
func TestJobsLeftAndWakeHonourRiverSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := dbtest.New(t)
	rs := riverSchema(t, db)
	cfg, err := config.Parse([]byte(jobsConfig), "jobs.toml")
	require.NoError(t, err)
	recs, err := enqueue.ReadJSONL(strings.NewReader("{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n"), "a1.jsonl")
	require.NoError(t, err)
	require.NoError(t, enqueue.Batch(ctx, db.Pool, rs, cfg, enqueue.Params{Pipeline: "pa", Batch: "a1", Records: recs}))

	n, err := jobs.Left(ctx, db.Pool, rs, []string{"a"})
	require.NoError(t, err)
	require.Equal(t, 3, n)

	_, err = db.Pool.Exec(ctx, `UPDATE `+rivertable.Job(rs)+` SET state = 'scheduled', scheduled_at = now() + interval '1 hour'`)
	require.NoError(t, err)
	n, err = jobs.WakeBatch(ctx, db.Pool, rs, "a1")
	require.NoError(t, err)
	require.Equal(t, 3, n, "the batch's snoozed jobs woken")
	_, err = db.Pool.Exec(ctx, `UPDATE `+rivertable.Job(rs)+` SET state = 'scheduled', scheduled_at = now() + interval '1 hour'`)
	require.NoError(t, err)
	n, err = jobs.WakeKey(ctx, db.Pool, rs, "a")
	require.NoError(t, err)
	require.Equal(t, 3, n, "the key's snoozed jobs woken")
	var queue string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT DISTINCT queue FROM `+rivertable.Job(rs)).Scan(&queue))
	require.Equal(t, keys.QueueName("a"), queue)
}

// The sweep that dead-letters jobs River discarded looks in River's schema,
// so a batch with a discarded job settles there too.
func TestSweepHonoursRiverSchema(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{}, tweaks{})
	rs := riverSchema(t, b.db)
	b.opts.Schema = rs
	b.opts.SpendCheck = 20 * time.Millisecond
	require.NoError(t, enqueue.Batch(context.Background(), b.db.Pool, rs, b.cfg,
		enqueue.Params{Pipeline: workertest.Pipeline, Batch: "b1", Records: records(3, nil)}))
	_, err := b.db.Pool.Exec(context.Background(), `UPDATE `+rivertable.Job(rs)+`
		SET state = 'discarded', finalized_at = now() WHERE id = (SELECT min(id) FROM `+rivertable.Job(rs)+`)`)
	require.NoError(t, err)
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, 1, st.DeadLettered)
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Equal(t, sweep.ReasonDiscarded, dls[0].Reason)
}
