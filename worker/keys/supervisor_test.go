package keys

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger/dbtest"
)

type callArgs struct {
	Key string `json:"key"`
}

func (callArgs) Kind() string { return "keys_test_call" }

// fakeKeyWorker plays a triage worker against a provider whose balance can
// run out: it admits through the breaker, trips it on "exhausted" and reports
// probes.
type fakeKeyWorker struct {
	river.WorkerDefaults[callArgs]
	store      *Store
	supervisor func() *Supervisor
	funded     atomic.Bool
	calls      atomic.Int64 // what the provider sees
	probes     atomic.Int64
	trips      atomic.Int64
	refusals   atomic.Int64
}

func (w *fakeKeyWorker) Work(ctx context.Context, job *river.Job[callArgs]) error {
	key := job.Args.Key
	adm, err := w.store.Admit(ctx, key, job.ID)
	if err != nil {
		return err
	}
	if !adm.Allowed {
		w.refusals.Add(1)
		// Real workers snooze for adm.Wait; River's clock is real here and
		// the store's is not, so a short snooze keeps the test fast.
		return river.JobSnooze(time.Millisecond)
	}
	w.calls.Add(1)
	if adm.Probe {
		w.probes.Add(1)
	}
	if !w.funded.Load() {
		tripped, err := w.store.Trip(ctx, key, adm, "insufficient_quota", probeInterval)
		if err != nil {
			return err
		}
		if tripped {
			w.trips.Add(1)
		}
		if err := w.supervisor().Reconcile(ctx, key); err != nil {
			return err
		}
		return river.JobSnooze(time.Millisecond)
	}
	if adm.Probe {
		if _, err := w.store.ProbeResult(ctx, key, adm, true, probeInterval); err != nil {
			return err
		}
		return w.supervisor().Reconcile(ctx, key)
	}
	return nil
}

type riverBundle struct {
	client *river.Client[pgx.Tx]
	worker *fakeKeyWorker
}

func newRiverClient(t *testing.T, db *dbtest.DB, pool *pgxpool.Pool, store *Store, key string, sup func() *Supervisor) *riverBundle {
	t.Helper()
	w := &fakeKeyWorker{store: store, supervisor: sup}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema: db.Schema,
		Queues: map[string]river.QueueConfig{
			QueueName(key):      {MaxWorkers: 5},
			ProbeQueueName(key): {MaxWorkers: 1},
		},
		Workers:           workers,
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		TestOnly:          true,
	})
	require.NoError(t, err)
	return &riverBundle{client: client, worker: w}
}

func startClient(t *testing.T, c *river.Client[pgx.Tx]) {
	t.Helper()
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
}

func queuePausedAt(t *testing.T, pool *pgxpool.Pool, queue string) (paused, exists bool) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT paused_at IS NOT NULL FROM river_queue WHERE name = $1`, queue).Scan(&paused)
	if err == pgx.ErrNoRows {
		return false, false
	}
	require.NoError(t, err)
	return paused, true
}

func jobCounts(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT queue || ':' || state, count(*) FROM river_job GROUP BY 1`)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		require.NoError(t, rows.Scan(&k, &n))
		out[k] = n
	}
	require.NoError(t, rows.Err())
	return out
}

func TestSupervisorPausesQueueWhenBreakerOpens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	rb := newRiverClient(t, b.db, b.db.Pool, b.store, "a", nil)
	sup, err := NewSupervisor(b.store, rb.client, SupervisorConfig{Keys: []string{"a"}})
	require.NoError(t, err)

	// No client has worked key_a yet: River has no queue row, and its
	// QueuePause says not found. The Supervisor creates the row paused.
	_, exists := queuePausedAt(t, b.db.Pool, QueueName("a"))
	require.False(t, exists)
	require.NoError(t, sup.ReconcileAll(ctx))
	_, exists = queuePausedAt(t, b.db.Pool, QueueName("a"))
	require.False(t, exists, "closed breaker, no pause: nothing to do")

	_, err = b.store.Trip(ctx, "a", Admission{}, "credits", probeInterval)
	require.NoError(t, err)
	require.NoError(t, sup.ReconcileAll(ctx))
	paused, exists := queuePausedAt(t, b.db.Pool, QueueName("a"))
	require.True(t, exists)
	require.True(t, paused)

	// Idempotent.
	require.NoError(t, sup.ReconcileAll(ctx))
	paused, _ = queuePausedAt(t, b.db.Pool, QueueName("a"))
	require.True(t, paused)

	// Manual resume.
	require.NoError(t, b.store.Reset(ctx, "a"))
	require.NoError(t, sup.Reconcile(ctx, "a"))
	paused, _ = queuePausedAt(t, b.db.Pool, QueueName("a"))
	require.False(t, paused)
}

func TestSupervisorResumesExpiredPauseOfDeadProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)

	// Process 1 runs a River client working key_a and a Supervisor loop.
	rb := newRiverClient(t, b.db, b.db.Pool, b.store, "a", nil)
	startClient(t, rb.client)
	sup, err := NewSupervisor(b.store, rb.client, SupervisorConfig{Tick: 10 * time.Millisecond})
	require.NoError(t, err)

	// Process 2 pauses the key (throttled), pauses the queue, and dies.
	pool2 := secondPool(t, b.db)
	store2, err := NewStore(pool2, StoreConfig{Clock: b.clock, Owner: "process-2"})
	require.NoError(t, err)
	rb2 := newRiverClient(t, b.db, pool2, store2, "a", nil)
	_, err = store2.Pause(ctx, "a", PauseThrottled, b.clock.Now().Add(30*time.Second))
	require.NoError(t, err)
	sup2, err := NewSupervisor(store2, rb2.client, SupervisorConfig{})
	require.NoError(t, err)
	require.NoError(t, sup2.Reconcile(ctx, "a"))
	paused, _ := queuePausedAt(t, b.db.Pool, QueueName("a"))
	require.True(t, paused)
	pool2.Close()

	require.NoError(t, sup.Start(ctx))
	t.Cleanup(sup.Stop)

	// Work arrives meanwhile; it must not run while paused.
	_, err = rb.client.Insert(ctx, callArgs{Key: "a"}, &river.InsertOpts{Queue: QueueName("a")})
	require.NoError(t, err)
	rb.worker.funded.Store(true)
	require.NoError(t, sup.ReconcileAll(ctx))
	paused, _ = queuePausedAt(t, b.db.Pool, QueueName("a"))
	require.True(t, paused, "pause still active")

	b.clock.Advance(30 * time.Second)
	eventually(t, 10*time.Second, "queue resumed", func() bool {
		paused, _ := queuePausedAt(t, b.db.Pool, QueueName("a"))
		return !paused
	})
	eventually(t, 10*time.Second, "job completed", func() bool {
		return jobCounts(t, b.db.Pool)[QueueName("a")+":completed"] == 1
	})
	require.Equal(t, int64(1), rb.worker.calls.Load())
}

// TestProbeProtocol is the scenario: 200 jobs queued, the balance runs
// out; the provider sees the calls in flight plus one probe per interval, the
// other jobs stay queued; after a top-up one probe succeeds and all complete.
func TestProbeProtocol(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const key, jobs = "main", 200

	var sup *Supervisor
	rb := newRiverClient(t, b.db, b.db.Pool, b.store, key, func() *Supervisor { return sup })
	sup, err := NewSupervisor(b.store, rb.client, SupervisorConfig{Keys: []string{key}, Tick: 10 * time.Millisecond})
	require.NoError(t, err)

	params := make([]river.InsertManyParams, jobs)
	for i := range params {
		params[i] = river.InsertManyParams{Args: callArgs{Key: key}, InsertOpts: &river.InsertOpts{Queue: QueueName(key)}}
	}
	_, err = rb.client.InsertMany(ctx, params)
	require.NoError(t, err)

	// The balance is empty from the start.
	startClient(t, rb.client)
	require.NoError(t, sup.Start(ctx))
	t.Cleanup(sup.Stop)

	settled := func() bool {
		c := jobCounts(t, b.db.Pool)
		paused, _ := queuePausedAt(t, b.db.Pool, QueueName(key))
		return paused && c[QueueName(key)+":running"] == 0 && c[ProbeQueueName(key)+":running"] == 0 &&
			c[QueueName(key)+":available"] == jobs
	}
	eventually(t, 10*time.Second, "breaker open, queue paused, nothing running", settled)
	firstCalls := rb.worker.calls.Load()
	require.GreaterOrEqual(t, firstCalls, int64(1))
	require.LessOrEqual(t, firstCalls, int64(5), "at most the calls in flight (MaxWorkers 5)")
	require.Equal(t, int64(1), rb.worker.trips.Load())
	require.Zero(t, rb.worker.probes.Load())

	// Probe interval passes, still no money: exactly one probe, then open again.
	b.clock.Advance(probeInterval)
	eventually(t, 10*time.Second, "a probe ran and failed", func() bool {
		st, err := b.store.KeyStatus(ctx, key)
		require.NoError(t, err)
		return rb.worker.probes.Load() == 1 && st.State == StateOpen && st.Generation == 2 && settled()
	})
	require.Equal(t, firstCalls+1, rb.worker.calls.Load())

	// Several ticks later (the probe time not reached): nothing more.
	for range 3 {
		require.NoError(t, sup.ReconcileAll(ctx))
	}
	require.Equal(t, firstCalls+1, rb.worker.calls.Load())
	require.Equal(t, jobs, jobCounts(t, b.db.Pool)[QueueName(key)+":available"])

	// Top-up; at the next probe time one probe succeeds and the batch drains.
	rb.worker.funded.Store(true)
	b.clock.Advance(probeInterval)
	eventually(t, 30*time.Second, "all jobs completed", func() bool {
		c := jobCounts(t, b.db.Pool)
		return c[QueueName(key)+":completed"]+c[ProbeQueueName(key)+":completed"] == jobs
	})
	require.Equal(t, int64(2), rb.worker.probes.Load())
	require.Equal(t, firstCalls+1+jobs, rb.worker.calls.Load(), "no job sent twice after the top-up")
	st, err := b.store.KeyStatus(ctx, key)
	require.NoError(t, err)
	require.Equal(t, StateClosed, st.State)
	paused, _ := queuePausedAt(t, b.db.Pool, QueueName(key))
	require.False(t, paused)
}

func TestSupervisorReclaimsProbeOfCrashedWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const key = "a"
	rb := newRiverClient(t, b.db, b.db.Pool, b.store, key, nil)
	sup, err := NewSupervisor(b.store, rb.client, SupervisorConfig{})
	require.NoError(t, err)

	res, err := rb.client.InsertMany(ctx, []river.InsertManyParams{
		{Args: callArgs{Key: key}, InsertOpts: &river.InsertOpts{Queue: QueueName(key)}},
		{Args: callArgs{Key: key}, InsertOpts: &river.InsertOpts{Queue: QueueName(key)}},
	})
	require.NoError(t, err)
	_, err = b.store.Trip(ctx, key, Admission{}, "credits", probeInterval)
	require.NoError(t, err)
	require.NoError(t, sup.ReconcileAll(ctx))
	require.Equal(t, map[string]int{QueueName(key) + ":available": 2}, jobCounts(t, b.db.Pool))

	b.clock.Advance(probeInterval)
	require.NoError(t, sup.ReconcileAll(ctx))
	require.Equal(t, map[string]int{QueueName(key) + ":available": 1, ProbeQueueName(key) + ":available": 1}, jobCounts(t, b.db.Pool))
	st, err := b.store.KeyStatus(ctx, key)
	require.NoError(t, err)
	require.Equal(t, StateHalfOpen, st.State)
	first := st.ProbeJobID
	require.Equal(t, res[0].Job.ID, first)

	// Another job cannot take the probe; the dispatched one can.
	adm, err := b.store.Admit(ctx, key, res[1].Job.ID)
	require.NoError(t, err)
	require.False(t, adm.Allowed)
	probe, err := b.store.Admit(ctx, key, first)
	require.NoError(t, err)
	require.True(t, probe.Probe)

	// Its worker crashes; the lease lapses; the next tick moves it back
	// and dispatches the next job.
	b.clock.Advance(ProbeLeaseDefault)
	require.NoError(t, sup.ReconcileAll(ctx))
	st, err = b.store.KeyStatus(ctx, key)
	require.NoError(t, err)
	require.Equal(t, StateHalfOpen, st.State)
	require.Equal(t, res[1].Job.ID, st.ProbeJobID)
	require.Equal(t, map[string]int{QueueName(key) + ":available": 1, ProbeQueueName(key) + ":available": 1}, jobCounts(t, b.db.Pool))

	applied, err := b.store.ProbeResult(ctx, key, probe, true, probeInterval)
	require.NoError(t, err)
	require.False(t, applied, "the crashed probe's late result is ignored")
}

func TestSupervisorStartStop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rb := newRiverClient(t, b.db, b.db.Pool, b.store, "a", nil)
	sup, err := NewSupervisor(b.store, rb.client, SupervisorConfig{Tick: time.Millisecond})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { require.NoError(t, sup.Start(context.Background())) })
	}
	wg.Wait()
	sup.Stop()
	sup.Stop()
}

// The probe goes to a job that can call: one whose worker would dead-letter
// it first (too few River attempts left, or too old) comes last.
func TestProbeSkipsJobsThatCannotCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	store, err := NewStore(b.db.Pool, StoreConfig{Clock: b.clock, Owner: "test-1", ProbeAttemptsLeft: 4, ProbeMaxAge: time.Hour})
	require.NoError(t, err)
	const key = "a"
	rb := newRiverClient(t, b.db, b.db.Pool, store, key, nil)
	sup, err := NewSupervisor(store, rb.client, SupervisorConfig{})
	require.NoError(t, err)
	params := make([]river.InsertManyParams, 3)
	for i := range params {
		params[i] = river.InsertManyParams{Args: callArgs{Key: key}, InsertOpts: &river.InsertOpts{Queue: QueueName(key), MaxAttempts: 9}}
	}
	res, err := rb.client.InsertMany(ctx, params)
	require.NoError(t, err)
	// The first has used its runs up; the second is older than ProbeMaxAge
	// (on the test's clock).
	_, err = b.db.Pool.Exec(ctx, `UPDATE river_job SET created_at = $1`, b.clock.Now())
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `UPDATE river_job SET attempt = 6 WHERE id = $1`, res[0].Job.ID)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `UPDATE river_job SET created_at = $2 WHERE id = $1`, res[1].Job.ID, b.clock.Now().Add(-2*time.Hour))
	require.NoError(t, err)

	_, err = store.Trip(ctx, key, Admission{}, "credits", probeInterval)
	require.NoError(t, err)
	b.clock.Advance(probeInterval)
	require.NoError(t, sup.ReconcileAll(ctx))
	st, err := store.KeyStatus(ctx, key)
	require.NoError(t, err)
	require.Equal(t, res[2].Job.ID, st.ProbeJobID, "the job that can call is the probe")
}
