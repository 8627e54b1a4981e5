package submitter

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/rivertable"
	"github.com/triage-dev/triage/worker/testclock"
)

// statementLog records the statements a pool runs, with their arguments.
type statementLog struct {
	mu    sync.Mutex
	stmts []recorded
}

type recorded struct {
	sql  string
	args []any
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stmts = append(l.stmts, recorded{sql: d.SQL, args: d.Args})
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *statementLog) take() []recorded {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.stmts
	l.stmts = nil
	return out
}

// linesRead runs each statement again under EXPLAIN ANALYZE (rolled back)
// and returns the rows it read from triage_provider_batch_line, counting
// those a filter removed, and whether any plan scanned the whole table.
func linesRead(t *testing.T, pool *pgxpool.Pool, stmts []recorded) (rows float64, seqScan bool) {
	t.Helper()
	ctx := context.Background()
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if n["Relation Name"] == "triage_provider_batch_line" {
			num := func(k string) float64 { f, _ := n[k].(float64); return f }
			rows += (num("Actual Rows") + num("Rows Removed by Filter") + num("Rows Removed by Index Recheck")) * max(1, num("Actual Loops"))
			if n["Node Type"] == "Seq Scan" {
				seqScan = true
			}
		}
		if kids, ok := n["Plans"].([]any); ok {
			for _, k := range kids {
				walk(k.(map[string]any))
			}
		}
	}
	for _, st := range stmts {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		var out []byte
		require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+st.sql, st.args...).Scan(&out), st.sql)
		require.NoError(t, tx.Rollback(ctx))
		var plans []struct {
			Plan map[string]any `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal(out, &plans))
		for _, p := range plans {
			walk(p.Plan)
		}
	}
	return rows, seqScan
}

// The auto-mode deadline check runs every tick, per key and per process:
// its cost must not grow with the lines in flight. With 20,000 lines in an
// open provider batch and no deadline near, a tick reads no line at all;
// with a deadline near, it reads only the lines of the batch whose deadline
// is near, asks for the cancel of only the provider batch holding them,
// and wakes only their jobs.
func TestDeadlineTickReadsOnlyTheLinesItNeeds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	now := time.Now()
	jobs := rivertable.Job(db.Schema)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	// Two triage batches of the auto pipeline: "far" has days left, "near"
	// an hour, within the pipeline's 3 h margin.
	exec(`INSERT INTO triage_batch (id, pipeline, key, total, deadline) VALUES
		('far', 'auto', 'k', 20005, $1), ('near', 'auto', 'k', 8, $2)`, now.Add(10*24*time.Hour), now.Add(time.Hour))
	var big, small int64
	require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO triage_provider_batch (key, vendor, model, lines, state, provider_batch_id, next_poll_at)
		VALUES ('k', 'openai', 'm', 20000, 'submitted', 'batch_big', $1) RETURNING id`, now.Add(time.Hour)).Scan(&big))
	require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO triage_provider_batch (key, vendor, model, lines, state, provider_batch_id, next_poll_at)
		VALUES ('k', 'openai', 'm', 10, 'submitted', 'batch_small', $1) RETURNING id`, now.Add(time.Hour)).Scan(&small))
	// lines adds n lines of batch in state (and provider batch pb, 0: none),
	// each with its intent attempt and a sleeping River job.
	lines := func(batch string, pb int64, state string, n int) {
		t.Helper()
		exec(`WITH j AS (
				INSERT INTO `+jobs+` (args, kind, max_attempts, queue, state, scheduled_at)
				SELECT '{}', 'triage_call', 25, 'triage_k', 'scheduled', $5::timestamptz FROM generate_series(1, $3) RETURNING id),
			a AS (
				INSERT INTO triage_attempt (batch, record_id, job_id, attempt, key, model, idempotency_key, request_hash, mode)
				SELECT $1, 'r' || j.id, j.id, 1, 'k', 'm', 'triage-' || j.id, 'h', 'batch' FROM j RETURNING id, job_id, record_id)
			INSERT INTO triage_provider_batch_line (provider_batch, key, job_id, batch, record_id, custom_id, attempt_id, body, state)
			SELECT nullif($2, 0), 'k', a.job_id, $1, a.record_id, 'triage-' || a.job_id, a.id, '{}', $4 FROM a`,
			batch, pb, n, state, now.Add(time.Hour))
	}
	lines("far", big, "submitted", 20000)
	lines("far", small, "submitted", 5)
	lines("near", small, "submitted", 5)
	lines("near", 0, "pending", 3)
	exec(`ANALYZE triage_provider_batch_line`)
	exec(`ANALYZE triage_attempt`)
	exec(`ANALYZE triage_batch`)
	exec(`ANALYZE triage_provider_batch`)

	trace := &statementLog{}
	cfg, err := pgxpool.ParseConfig(db.URL)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = trace
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	// Three days earlier no deadline is near.
	clock := testclock.New(now.Add(-72 * time.Hour))
	s := &Submitter{cfg: Config{Pool: pool, RiverSchema: db.Schema, Clock: clock}, key: "k", log: slog.New(slog.DiscardHandler),
		auto: []ledger.AutoMargin{{Pipeline: "auto", Margin: 3 * time.Hour}}}
	require.NoError(t, s.deadlines(ctx))
	read, seq := linesRead(t, db.Pool, trace.take())
	require.False(t, seq, "no tick scans the whole line table (%v lines read)", read)
	require.Zero(t, read, "no deadline near: a tick reads no line")

	// Now: the near batch's deadline is within the margin.
	clock.Set(now)
	require.NoError(t, s.deadlines(ctx))
	stmts := trace.take()
	var cancelled []int64
	rows, err := db.Pool.Query(ctx, `SELECT id FROM triage_provider_batch WHERE cancel_requested ORDER BY id`)
	require.NoError(t, err)
	cancelled, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, []int64{small}, cancelled, "only the provider batch holding lines of the near batch is cancelled")
	var woken int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+jobs+` WHERE state = 'available'`).Scan(&woken))
	require.Equal(t, 3, woken, "the jobs of the near batch's pending lines are woken")

	read, seq = linesRead(t, db.Pool, stmts)
	t.Logf("a tick near a deadline read %v lines", read)
	require.False(t, seq, "no tick scans the whole line table (%v lines read)", read)
	require.LessOrEqual(t, read, 100.0, "a tick near a deadline reads the near batch's lines, not the 20,000 others")
}
