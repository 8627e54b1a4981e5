package rivertable_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/rivertable"
)

type wakeArgs struct {
	Name string `json:"name"`
}

func (wakeArgs) Kind() string { return "wake_order" }

type wakeWorker struct {
	river.WorkerDefaults[wakeArgs]
	mu    sync.Mutex
	order []string
	done  chan struct{}
	want  int
}

func (w *wakeWorker) Work(_ context.Context, job *river.Job[wakeArgs]) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.order = append(w.order, job.Args.Name)
	if len(w.order) == w.want {
		close(w.done)
	}
	return nil
}

// A job woken with its paid answer (WakeJobs, WakeJobsOfLines) takes its
// place in the queue by when it was queued, not behind every record queued
// after it: in a night larger than one provider batch, the collected
// answers are applied (and their records completed, their lines' answers
// dropped) while the rest of the night's lines are still being written,
// instead of after the last of them.
func TestWokenJobsRunAheadOfJobsQueuedAfterThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.Options{})
	w := &wakeWorker{done: make(chan struct{}), want: 6}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	rc, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{Schema: db.Schema, Workers: workers,
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}}})
	require.NoError(t, err)

	// The job whose line went out first: queued, then asleep for its answer.
	first, err := rc.Insert(ctx, wakeArgs{Name: "answered"}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	// The night's records queued after it, not yet sent.
	var later []river.InsertManyParams
	for _, n := range []string{"later1", "later2", "later3", "later4", "later5"} {
		later = append(later, river.InsertManyParams{Args: wakeArgs{Name: n}})
	}
	_, err = rc.InsertMany(ctx, later)
	require.NoError(t, err)

	n, err := rivertable.WakeJobs(ctx, db.Pool, db.Schema, []int64{first.Job.ID})
	require.NoError(t, err)
	require.Equal(t, 1, n)

	require.NoError(t, rc.Start(ctx))
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rc.Stop(stop)
	})
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the six jobs did not run within 30 s")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, "answered", w.order[0], "the woken job runs first: %v", w.order)
}
