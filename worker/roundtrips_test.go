package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/keys"
)

// roundTripsPerFirstSend is what one job that calls once and commits
// alone costs in database round trips: the admission with the prior read
// and the intent (one batch); then one batch that begins the transaction
// and holds the answer's ledger writes (one statement), the end of the
// key's safety-net runs and River's completion of the job; and the
// commit. Before issue 22's work it was eight: admission, intent, the
// safety net's reset, begin, outcome, result, River's completion, commit.
// A job whose answer joins another job's group commit costs only the
// admission: the group's batch and commit are counted on the job that led
// it.
const (
	roundTripsPerFirstSend = 3
	roundTripsInAGroup     = 1
)

// A job's round trips to PostgreSQL, counted on the process's pool by a
// pgx tracer: a regression that adds one to the per-job path fails here.
func TestRoundTripsPerFirstSend(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true}, tweaks{})
	// A pace no job waits for: a job that waits writes its intent after
	// the wait, in a round trip of its own.
	b.opts.Pacing = keys.PacerConfig{InitialRate: 10000}
	tr := &roundTrips{}
	rt := b.tracedRuntime(t, tr)
	b.run(t, rt)
	const n = 10
	b.enqueue(t, "b1", records(n, nil))
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	stop, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, rt.Stop(stop))
	require.Equal(t, n, b.fake.Stats().Requests)

	jobs := tr.jobs()
	require.Len(t, jobs, n)
	for id, trips := range jobs {
		t.Logf("job %d: %d round trips:\n%s", id, len(trips), strings.Join(trips, "\n"))
	}
	total := 0
	for id, trips := range jobs {
		require.Contains(t, []int{roundTripsPerFirstSend, roundTripsInAGroup}, len(trips), "job %d: %s", id, strings.Join(trips, "\n"))
		total += len(trips)
	}
	require.LessOrEqual(t, total, n*roundTripsPerFirstSend)
}

// jobIDKey carries a job's id on the context of its runs.
type jobIDKey struct{}

// roundTrips is a pgx tracer that records the round trips of each job's
// runs: every query and Exec (Begin and Commit included) and every batch,
// a batch being one round trip whatever it holds.
type roundTrips struct {
	mu       sync.Mutex
	trips    map[int64][]string
	batchEnd map[int64]int
}

func (r *roundTrips) add(ctx context.Context, what string) {
	id, ok := ctx.Value(jobIDKey{}).(int64)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.trips == nil {
		r.trips = map[int64][]string{}
	}
	r.trips[id] = append(r.trips[id], what)
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(ctx, firstLine(d.SQL))
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	qs := make([]string, 0, d.Batch.Len())
	for _, q := range d.Batch.QueuedQueries {
		qs = append(qs, firstLine(q.SQL))
	}
	r.add(ctx, fmt.Sprintf("batch [%s]", strings.Join(qs, "; ")))
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	id, ok := ctx.Value(jobIDKey{}).(int64)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.batchEnd == nil {
		r.batchEnd = map[int64]int{}
	}
	r.batchEnd[id]++
}

// jobs is a copy of the round trips recorded, by job.
func (r *roundTrips) jobs() map[int64][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int64][]string, len(r.trips))
	for id, t := range r.trips {
		out[id] = append([]string(nil), t...)
	}
	return out
}

// batchesEnded is how many batches the runs of all jobs have had answered:
// the first is a run's admission.
func (r *roundTrips) batchesEnded() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.batchEnd {
		n += c
	}
	return n
}

func firstLine(sql string) string {
	sql = strings.TrimSpace(sql)
	if i := strings.IndexByte(sql, '\n'); i >= 0 {
		sql = sql[:i]
	}
	return sql
}

// tracedRuntime is newRuntime on a pool traced by tr, the runs' contexts
// carrying their job's id.
func (b *testBundle) tracedRuntime(t testing.TB, tr *roundTrips) *worker.Runtime {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(b.db.URL)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	opts := b.opts
	opts.Pool = pool
	rt, err := worker.New(opts)
	require.NoError(t, err)
	rt.SetWorkContext(func(ctx context.Context, jobID int64) context.Context {
		return context.WithValue(ctx, jobIDKey{}, jobID)
	})
	return rt
}
