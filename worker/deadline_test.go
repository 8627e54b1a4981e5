package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/enqueue"
)

// Enqueue stores the batch's deadline: the pipeline's, or the one given
// (which wins), counted from the enqueue moment; none when neither has one.
// A batch that is refused stores nothing.
func TestEnqueueStoresDeadline(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := dbtest.New(t)
	cfg, err := config.Parse([]byte(strings.Replace(jobsConfig, `name = "pa"`, "name = \"pa\"\ndeadline = \"06:00\"", 1)), "jobs.toml")
	require.NoError(t, err)
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	evening := time.Date(2026, 12, 1, 22, 15, 0, 0, paris)
	recs, err := enqueue.ReadJSONL(strings.NewReader("{\"id\":\"a\"}\n{\"id\":\"b\"}\n"), "in.jsonl")
	require.NoError(t, err)
	eightHours, err := config.ParseDeadline("8h")
	require.NoError(t, err)

	for _, tc := range []struct {
		batch, pipeline string
		deadline        config.Deadline
		want            *time.Time
	}{
		{"pipeline", "pa", config.Deadline{}, atTime(time.Date(2026, 12, 2, 6, 0, 0, 0, paris))},
		{"flag", "pa", eightHours, atTime(evening.Add(8 * time.Hour))},
		{"flag-only", "pb", eightHours, atTime(evening.Add(8 * time.Hour))},
		{"none", "pb", config.Deadline{}, nil},
	} {
		require.NoError(t, enqueue.Batch(ctx, db.Pool, db.Schema, cfg, enqueue.Params{Pipeline: tc.pipeline, Batch: tc.batch,
			Records: recs, Deadline: tc.deadline, Now: evening}), tc.batch)
		b, err := ledger.GetBatch(ctx, db.Pool, tc.batch)
		require.NoError(t, err)
		if tc.want == nil {
			require.Nil(t, b.Deadline, tc.batch)
			continue
		}
		require.NotNil(t, b.Deadline, tc.batch)
		require.True(t, tc.want.Equal(*b.Deadline), "%s: got %s, want %s", tc.batch, b.Deadline, tc.want)
	}

	// Without Now, the deadline counts from the moment of the call.
	before := time.Now()
	require.NoError(t, enqueue.Batch(ctx, db.Pool, db.Schema, cfg, enqueue.Params{Pipeline: "pb", Batch: "now", Records: recs, Deadline: eightHours}))
	b, err := ledger.GetBatch(ctx, db.Pool, "now")
	require.NoError(t, err)
	require.WithinRange(t, *b.Deadline, before.Add(8*time.Hour).Add(-time.Second), time.Now().Add(8*time.Hour))

	// An id in use: the first batch keeps its deadline, nothing else is written.
	err = enqueue.Batch(ctx, db.Pool, db.Schema, cfg, enqueue.Params{Pipeline: "pb", Batch: "pipeline", Records: recs, Deadline: eightHours, Now: evening})
	require.ErrorIs(t, err, ledger.ErrBatchExists)
	b, err = ledger.GetBatch(ctx, db.Pool, "pipeline")
	require.NoError(t, err)
	require.True(t, time.Date(2026, 12, 2, 6, 0, 0, 0, paris).Equal(*b.Deadline))
}

func atTime(t time.Time) *time.Time { return &t }
