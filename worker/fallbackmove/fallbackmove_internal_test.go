package fallbackmove

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/jobargs"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/rivertable"
	"github.com/triage-dev/triage/worker/service/servicetest"
	"github.com/triage-dev/triage/worker/testclock"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	plan := func(*river.Job[jobargs.Args]) (Plan, bool) { return Plan{}, false }
	ok := Config{Pool: &pgxpool.Pool{}, Config: &config.Config{}, Status: &keys.Store{}, Plan: plan}
	servicetest.RequiredFields(t, ok, New, "Pool", "Config", "Status", "Plan")
	if m, err := New(ok); assert.NoError(t, err) {
		assert.Equal(t, TickDefault, m.cfg.Tick)
	}
	ok.Tick = -time.Second
	servicetest.Refused(t, New, ok, "Config.Tick must not be negative")
}

// moverConfig: key "main" serves "m", key "fb" serves "fb-model" with a
// 1000-token window; the pipeline falls back to it after 5 s.
const moverConfig = `
[[keys]]
name = "main"
vendor = "openai"
base_url = "http://127.0.0.1:1"
api_key_env = "NONE"

[[keys]]
name = "fb"
vendor = "openai"
base_url = "http://127.0.0.1:1"
api_key_env = "NONE"

[[models]]
name = "m"
key = "main"

[[models]]
name = "fb-model"
key = "fb"
context_tokens = 1000
max_output_tokens = 4096

[[pipelines]]
name = "p"
model = "m"
prompt = "Record: {{json .}}"
output = "text"
fallback = ["fb-model"]
fallback_grace = "5s"
`

// moverWorld is a schema with n records of pipeline p queued on key main,
// whose exhausted breaker opened at the clock's start.
func moverWorld(t *testing.T, n int) (*dbtest.DB, *config.Config, *testclock.Clock, *keys.Store) {
	t.Helper()
	ctx := context.Background()
	db := dbtest.New(t)
	cfg, err := config.Parse([]byte(moverConfig), "triage.toml")
	require.NoError(t, err)
	recs := make([]ledger.Record, n)
	for i := range recs {
		id := fmt.Sprintf("r%d", i)
		recs[i] = ledger.Record{ID: id, Line: i + 1, Data: []byte(`{"id":"` + id + `"}`)}
	}
	require.NoError(t, enqueue.Batch(ctx, db.Pool, db.Schema, cfg, enqueue.Params{Pipeline: "p", Batch: "b", Records: recs}))
	clock := testclock.New(time.Now())
	store, err := keys.NewStore(db.Pool, keys.StoreConfig{Clock: clock, RiverSchema: db.Schema})
	require.NoError(t, err)
	_, err = store.Trip(ctx, "main", keys.Admission{}, "credits", time.Minute)
	require.NoError(t, err)
	return db, cfg, clock, store
}

func newMover(t *testing.T, db *dbtest.DB, cfg *config.Config, store *keys.Store, need decide.Need) *Mover {
	t.Helper()
	p, err := cfg.Pipeline("p")
	require.NoError(t, err)
	m, err := cfg.Model("m")
	require.NoError(t, err)
	mv, err := New(Config{Pool: db.Pool, Schema: db.Schema, Config: cfg, Status: store, Keys: []string{"main", "fb"},
		Logger: slog.New(slog.DiscardHandler),
		Plan:   func(*river.Job[jobargs.Args]) (Plan, bool) { return Plan{Pipeline: p, Model: m, Need: need}, true }})
	require.NoError(t, err)
	return mv
}

// queued is how many jobs wait on key's queue.
func queued(t *testing.T, db *dbtest.DB, key string) int {
	t.Helper()
	jobs, err := rivertable.ListQueued(context.Background(), db.Pool, db.Schema, keys.QueueName(key), jobargs.Kind, "none", "x", 1000)
	require.NoError(t, err)
	return len(jobs)
}

// One pass moves the open key's queued jobs to the fallback once the
// breaker has been open past fallback_grace, and none before.
func TestRunOnceMovesAfterTheGrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, cfg, clock, store := moverWorld(t, 5)
	mv := newMover(t, db, cfg, store, decide.Need{InputTokens: 10, MaxTokens: 100})

	require.Equal(t, Result{}, mv.RunOnce(ctx), "within the grace nothing moves")
	require.Equal(t, 5, queued(t, db, "main"))

	clock.Advance(6 * time.Second)
	require.Equal(t, Result{Moved: 5}, mv.RunOnce(ctx))
	require.Equal(t, 0, queued(t, db, "main"))
	require.Equal(t, 5, queued(t, db, "fb"))
	st, err := ledger.BatchStatus(ctx, db.Pool, "b")
	require.NoError(t, err)
	require.Equal(t, 5, st.Total)
}

// Jobs no fallback can serve stay, marked once per opening: the next pass
// does not look at them again.
func TestRunOnceMarksJobsWithoutACapableFallback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, cfg, clock, store := moverWorld(t, 3)
	mv := newMover(t, db, cfg, store, decide.Need{InputTokens: 5000, MaxTokens: 100}) // over the fallback's window
	clock.Advance(6 * time.Second)

	require.Equal(t, Result{Marked: 3}, mv.RunOnce(ctx))
	require.Equal(t, Result{}, mv.RunOnce(ctx), "marked under this opening")
	require.Equal(t, 3, queued(t, db, "main"))
	require.Equal(t, 0, queued(t, db, "fb"))
}

// Start runs passes until Stop; each is heard on the test signal.
func TestStartSignalsEachPass(t *testing.T) {
	t.Parallel()
	db, cfg, clock, store := moverWorld(t, 2)
	mv := newMover(t, db, cfg, store, decide.Need{InputTokens: 10, MaxTokens: 100})
	mv.cfg.Tick = time.Millisecond
	clock.Advance(6 * time.Second)
	mv.TestSignals.Passes = make(chan Result, 1)
	mv.Start(context.Background())
	defer mv.Stop()
	require.Equal(t, Result{Moved: 2}, <-mv.TestSignals.Passes)
	require.Equal(t, Result{}, <-mv.TestSignals.Passes)
}

// The open-line rule: a job whose line was not sent yet moves, its line
// taken back in the move's transaction (ledger.TakeBackBatchLine).
func TestRunOnceTakesBackAnUnsentLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, cfg, clock, store := moverWorld(t, 1)
	jobs, err := rivertable.ListQueued(ctx, db.Pool, db.Schema, keys.QueueName("main"), jobargs.Kind, "none", "x", 10)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	attempt, err := ledger.ReserveAttempt(ctx, db.Pool, ledger.Intent{Batch: "b", RecordID: "r0", JobID: jobs[0].ID, Attempt: 1,
		Key: "main", Model: "m", IdempotencyKey: "c0", RequestHash: "h"})
	require.NoError(t, err)
	_, err = ledger.AddBatchLine(ctx, db.Pool, ledger.NewBatchLine{Key: "main", JobID: jobs[0].ID, Batch: "b", RecordID: "r0",
		CustomID: "c0", AttemptID: attempt, Body: []byte(`{}`)})
	require.NoError(t, err)
	mv := newMover(t, db, cfg, store, decide.Need{InputTokens: 10, MaxTokens: 100})
	clock.Advance(6 * time.Second)

	require.Equal(t, Result{Moved: 1}, mv.RunOnce(ctx))
	lines, err := ledger.OpenBatchLines(ctx, db.Pool, []int64{jobs[0].ID})
	require.NoError(t, err)
	require.Empty(t, lines, "the unsent line was taken back")
	require.Equal(t, 1, queued(t, db, "fb"))
}
