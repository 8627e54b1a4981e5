package operator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/operator"
	"github.com/triage-dev/triage/worker/workertest"
)

type testBundle struct {
	db  *dbtest.DB
	cfg *config.Config
	rc  *river.Client[pgx.Tx]
}

// setup enqueues batch b1 of n records (no worker runs: the jobs stay
// available) against a provider nobody listens on.
func setup(t *testing.T, n int) *testBundle {
	t.Helper()
	db := dbtest.New(t)
	cfg, err := config.Parse([]byte(workertest.Config(workertest.ConfigOptions{BaseURL: "http://127.0.0.1:9/v1"})), "test.toml")
	require.NoError(t, err)
	require.NoError(t, enqueue.Batch(context.Background(), db.Pool, db.Schema, cfg,
		enqueue.Params{Pipeline: workertest.Pipeline, Batch: "b1", Records: workertest.Records(n, nil)}))
	rc, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{Schema: db.Schema})
	require.NoError(t, err)
	return &testBundle{db: db, cfg: cfg, rc: rc}
}

// jobsOf returns the River jobs of a record in the given states.
func (b *testBundle) jobsOf(t *testing.T, record string, states ...rivertype.JobState) []*rivertype.JobRow {
	t.Helper()
	res, err := b.rc.JobList(context.Background(), river.NewJobListParams().States(states...).First(1000))
	require.NoError(t, err)
	var out []*rivertype.JobRow
	for _, j := range res.Jobs {
		var a jobargs.Args
		require.NoError(t, unmarshalArgs(j, &a))
		if a.RecordID == record {
			out = append(out, j)
		}
	}
	return out
}

var liveStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}

// deadLetter writes a dead letter for record with its job still live: the
// worker wrote it and died before its cancel landed.
func (b *testBundle) deadLetter(t *testing.T, record string, jobID int64) int64 {
	t.Helper()
	id, err := ledger.AddDeadLetter(context.Background(), b.db.Pool, ledger.DeadLetterRow{
		Batch: "b1", RecordID: record, JobID: jobID, Pipeline: workertest.Pipeline, Key: workertest.Key,
		Class: classify.Rejected, Reason: "invalid_request", HTTPStatus: 400, Attempts: 1,
	})
	require.NoError(t, err)
	return id
}

// Issue 9 fault 6: a dead letter whose job is still live is not requeued, so
// one record never has two live jobs; once the old job is finished the
// requeue goes through.
func TestRequeueRefusesWhileTheOldJobIsLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 3)
	live := b.jobsOf(t, "r002", liveStates...)
	require.Len(t, live, 1)
	dl := b.deadLetter(t, "r002", live[0].ID)

	for _, sel := range []operator.Selection{{IDs: []int64{dl}}, {Batch: "b1"}, {Batch: "b1", Class: "rejected"}} {
		_, err := operator.Requeue(ctx, b.db.Pool, b.cfg, sel, operator.RequeueOptions{})
		var liveErr *operator.LiveJobError
		require.ErrorAs(t, err, &liveErr, "selection %s", sel)
		require.Equal(t, []operator.LiveJob{{DeadLetterID: dl, JobID: live[0].ID, State: "available"}}, liveErr.Jobs)
		require.Contains(t, err.Error(), "still live")
		require.Len(t, b.jobsOf(t, "r002", liveStates...), 1, "one live job for the record")
		got, err := ledger.GetDeadLetter(ctx, b.db.Pool, dl)
		require.NoError(t, err)
		require.Nil(t, got.RequeuedAt, "nothing marked")
	}

	// The old job runs, finds its dead letter and cancels itself.
	_, err := b.rc.JobCancel(ctx, live[0].ID)
	require.NoError(t, err)
	res, err := operator.Requeue(ctx, b.db.Pool, b.cfg, operator.Selection{IDs: []int64{dl}}, operator.RequeueOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Requeued)
	require.Equal(t, []int64{dl}, res.IDs)
	jobs := b.jobsOf(t, "r002", liveStates...)
	require.Len(t, jobs, 1, "exactly one live job after the requeue")
	require.NotEqual(t, live[0].ID, jobs[0].ID)
}

func TestRequeueInputErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	for _, sel := range []operator.Selection{{}, {IDs: []int64{1}, Batch: "b1"}, {Class: "rejected"},
		{Batch: "nope"}, {IDs: []int64{999}}, {Batch: "b1", Class: "bogus"}} {
		_, err := operator.Requeue(ctx, b.db.Pool, b.cfg, sel, operator.RequeueOptions{})
		var in *operator.InputError
		require.True(t, errors.As(err, &in), "selection %+v: %v", sel, err)
	}
}
