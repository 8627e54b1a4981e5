package retention_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/retention"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const day = 24 * time.Hour

// fixture writes, with created/ended/requeued moments in the past as given:
// a provider batch collected 40 days ago with two closed lines (one still
// holding its body: closed while the batch was live); one collected 40
// days ago that still holds an open line (an unsettled batch needs it);
// one collected yesterday; alerts of 40 days and of a day ago; dead
// letters requeued 100 and 10 days ago, and one never requeued from 200
// days ago.
func fixture(t *testing.T, db *dbtest.DB) {
	t.Helper()
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	pb := func(id int64, ended time.Duration) {
		exec(`INSERT INTO triage_provider_batch (id, key, vendor, model, state, created_at, collected_at)
			VALUES ($1, 'k', 'openai', 'm', 'collected', now() - $2::interval, now() - $2::interval)`, id, ended.String())
	}
	line := func(pbID, job int64, state, body string) {
		exec(`INSERT INTO triage_provider_batch_line (provider_batch, key, job_id, batch, record_id, custom_id, body, state, observation)
			VALUES ($1, 'k', $2, 'b', 'r', 'c', $3::jsonb, $4, CASE WHEN $4 = 'answered' THEN '{}'::jsonb END)`, pbID, job, body, state)
	}
	pb(1, 40*day)
	line(1, 1, "applied", `{"model":"m"}`)
	line(1, 2, "applied", `null`)
	pb(2, 40*day)
	line(2, 3, "applied", `null`)
	line(2, 4, "answered", `{"model":"m"}`)
	pb(3, day)
	line(3, 5, "applied", `{"model":"m"}`)
	exec(`INSERT INTO triage_alert (kind, created_at) VALUES ('old', now() - interval '40 days'), ('new', now() - interval '1 day')`)
	exec(`INSERT INTO triage_pace_history (key, at, source, rate_per_s) VALUES
		('k', now() - interval '40 days', 'headers', 5), ('k', now() - interval '1 day', 'headers', 6)`)
	dl := func(rec string, created, requeued *time.Duration) {
		var c, r *string
		if created != nil {
			s := created.String()
			c = &s
		}
		if requeued != nil {
			s := requeued.String()
			r = &s
		}
		exec(`INSERT INTO triage_dead_letter (batch, record_id, job_id, pipeline, key, class, reason, created_at, requeued_at)
			VALUES ('b', $1, 1, 'p', 'k', 'rejected', 'x', now() - $2::interval, now() - $3::interval)`, rec, c, r)
	}
	d200, d100, d10 := 200*day, 100*day, 10*day
	dl("old-requeued", &d200, &d100)
	dl("recent-requeued", &d200, &d10)
	dl("never-requeued", &d200, nil)
}

func newService(db *dbtest.DB) *retention.Service {
	return retention.New(retention.Config{Pool: db.Pool, Age: 30 * day, DeadLetterAge: 90 * day, Logger: slog.New(slog.DiscardHandler)})
}

// One pass prunes what is older than its age and nothing an unsettled
// batch still needs; a second pass finds nothing left to do.
func TestRunOncePrunesOldFinishedWork(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	fixture(t, db)
	svc := newService(db)
	res, err := svc.RunOnce(context.Background())
	require.NoError(t, err)
	require.True(t, res.Ran)
	require.Equal(t, ledger.Pruned{Stripped: 2, ProviderBatches: 1, Lines: 2, Alerts: 1, DeadLetters: 1, PaceHistory: 1}, res.Pruned)

	ids := func(sql string) []string {
		t.Helper()
		rows, err := db.Pool.Query(context.Background(), sql)
		require.NoError(t, err)
		var out []string
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out = append(out, s)
		}
		require.NoError(t, rows.Err())
		return out
	}
	require.Equal(t, []string{"2", "3"}, ids(`SELECT id::text FROM triage_provider_batch ORDER BY id`),
		"the batch with an open line and the recent one stay")
	require.Equal(t, []string{"3:applied:null", "4:answered:{\"model\": \"m\"}", "5:applied:null"},
		ids(`SELECT job_id || ':' || state || ':' || body::text FROM triage_provider_batch_line ORDER BY job_id`),
		"an open line keeps its body; a closed one of a collected batch loses it")
	require.Equal(t, []string{"new"}, ids(`SELECT kind FROM triage_alert`))
	require.Equal(t, []string{"6"}, ids(`SELECT rate_per_s::text FROM triage_pace_history`), "the pace of a day ago stays")
	require.Equal(t, []string{"never-requeued", "recent-requeued"}, ids(`SELECT record_id FROM triage_dead_letter ORDER BY 1`))

	res, err = svc.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, retention.Result{Ran: true}, res, "nothing left to prune")
}

// A paid answer whose job was cancelled by hand (its attempt settled by
// the submitter, job_gone) is held for a requeue for the age, then closed
// and pruned with its provider batch. An answer whose attempt is still an
// intent (its job will apply it) is never touched.
func TestRunOnceClosesHeldAnswersAfterTheAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exec(`INSERT INTO triage_provider_batch (id, key, vendor, model, state, created_at, collected_at)
		VALUES (1, 'k', 'openai', 'm', 'collected', now() - interval '40 days', now() - interval '40 days')`)
	// held: job, attempt status, answered how long ago
	for i, l := range []struct {
		status string
		ago    time.Duration
	}{{"ok", 40 * day}, {"ok", day}, {"intent", 40 * day}} {
		exec(`INSERT INTO triage_attempt (id, batch, record_id, job_id, attempt, key, model, idempotency_key, request_hash, status, reason, mode)
			VALUES ($1, 'b', 'r' || $1::bigint, $1, 1, 'k', 'm', 'c' || $1::bigint, 'h', $2, CASE WHEN $2 = 'ok' THEN 'job_gone' END, 'batch')`, i+1, l.status)
		exec(`INSERT INTO triage_provider_batch_line (provider_batch, key, job_id, batch, record_id, custom_id, attempt_id, body, state, observation, answered_at)
			VALUES (1, 'k', $1, 'b', 'r' || $1::bigint, 'c' || $1::bigint, $1, '{"model":"m"}', 'answered', '{}', now() - $2::interval)`, i+1, l.ago.String())
	}
	res, err := newService(db).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Pruned.HeldAnswers, "the answer held past the age is closed")
	lines := map[int64]string{}
	rows, err := db.Pool.Query(ctx, `SELECT job_id, state FROM triage_provider_batch_line`)
	require.NoError(t, err)
	for rows.Next() {
		var (
			job   int64
			state string
		)
		require.NoError(t, rows.Scan(&job, &state))
		lines[job] = state
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[int64]string{1: "applied", 2: "answered", 3: "answered"}, lines,
		"a recent held answer, and one its job will apply, stay; the batch stays while they do")
}

// One process at a time: while another holds the prune lock, a pass does
// nothing.
func TestRunOnceSkipsWhileAnotherProcessPrunes(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	fixture(t, db)
	conn, err := db.Pool.Acquire(context.Background())
	require.NoError(t, err)
	defer conn.Release()
	mine, err := ledger.TryPruneLock(context.Background(), conn)
	require.NoError(t, err)
	require.True(t, mine)

	res, err := newService(db).RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, retention.Result{}, res, "skipped")

	require.NoError(t, ledger.PruneUnlock(context.Background(), conn))
	res, err = newService(db).RunOnce(context.Background())
	require.NoError(t, err)
	require.True(t, res.Ran)
	require.Equal(t, 1, res.Pruned.Alerts)
}

// The service runs a pass when started and stops cleanly.
func TestServiceStartRunsAPass(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	fixture(t, db)
	svc := newService(db)
	svc.TestSignals.Passes = make(chan retention.Result, 1)
	svc.Start(context.Background())
	defer svc.Stop()
	select {
	case res := <-svc.TestSignals.Passes:
		require.True(t, res.Ran)
		require.Equal(t, 1, res.Pruned.Alerts)
	case <-time.After(30 * time.Second):
		t.Fatal("no pass within 30 s of Start")
	}
}

func TestTableSizes(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	fixture(t, db)
	sizes, err := ledger.TableSizes(context.Background(), db.Pool)
	require.NoError(t, err)
	byName := map[string]ledger.TableSize{}
	for _, s := range sizes {
		byName[s.Table] = s
	}
	for _, name := range []string{"triage_provider_batch_line", "triage_attempt", "triage_record", "river_job"} {
		require.Contains(t, byName, name)
		require.Positive(t, byName[name].Bytes, name)
	}
}

// attemptsFixture writes two batches: "old", whose records finished 40
// days ago, and "new", finished yesterday. Each record has a failed call
// before the one that answered; only the old records' failed calls that
// billed nothing, and that nothing still needs, may go.
func attemptsFixture(t *testing.T, db *dbtest.DB) {
	t.Helper()
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exec(`INSERT INTO triage_batch (id, pipeline, key, total) VALUES ('old', 'p', 'k', 7), ('new', 'p', 'k', 1)`)
	var id int64
	attempt := func(batch, rec, status string, ago time.Duration, cost float64, tokens int) int64 {
		t.Helper()
		id++
		class := map[string]any{"ok": "ok", "failed": "throttled", "possibly_billed": "ambiguous", "intent": nil}[status]
		exec(`INSERT INTO triage_attempt (id, batch, record_id, job_id, attempt, key, model, idempotency_key, request_hash,
				status, class, cost_usd, input_tokens, output_tokens, est_cost_usd, is_retry, started_at, finished_at)
			VALUES ($1::bigint, $2, $3, $1::bigint, $1::int, 'k', 'm', $2 || '/' || $3, 'h', $4, $5, $6, $7, $7, 0.001, $1::bigint > 1,
				now() - $8::interval, CASE WHEN $4 <> 'intent' THEN now() - $8::interval END)`,
			id, batch, rec, status, class, cost, tokens, ago.String())
		return id
	}
	record := func(batch, rec string, ago time.Duration, failed ...func()) {
		t.Helper()
		exec(`INSERT INTO triage_record (batch, record_id, line, data) VALUES ($1, $2, 1, '{}')`, batch, rec)
		for _, f := range failed {
			f()
		}
	}
	result := func(batch, rec string, ago time.Duration) {
		t.Helper()
		ok := attempt(batch, rec, "ok", ago, 0.002, 10)
		exec(`INSERT INTO triage_result (batch, record_id, output, attempt_id, completed_at)
			VALUES ($1, $2, '{}', $3, now() - $4::interval)`, batch, rec, ok, ago.String())
	}
	failed := func(batch, rec string, ago time.Duration) func() {
		return func() { attempt(batch, rec, "failed", ago, 0, 0) }
	}
	old := 40 * day
	// pruned: a failed call of a record answered 40 days ago.
	record("old", "gone", old, failed("old", "gone", old), failed("old", "gone", old))
	result("old", "gone", old)
	// kept: a failed call that billed (an answer that failed validation).
	record("old", "billed", old, func() { attempt("old", "billed", "failed", old, 0.003, 20) })
	result("old", "billed", old)
	// kept: the record has no result (its dead letter is in force, a
	// requeue reads its history).
	record("old", "dead", old, failed("old", "dead", old))
	exec(`INSERT INTO triage_dead_letter (batch, record_id, job_id, pipeline, key, class, reason, created_at)
		VALUES ('old', 'dead', 1, 'p', 'k', 'rejected', 'x', now() - interval '40 days')`)
	// kept: the record has a call whose answer was lost, still possibly
	// billed, and one still in flight (an unsettled intent).
	record("old", "ambiguous", old, failed("old", "ambiguous", old), func() { attempt("old", "ambiguous", "possibly_billed", old, 0, 0) })
	result("old", "ambiguous", old)
	record("old", "inflight", old, failed("old", "inflight", old), func() { attempt("old", "inflight", "intent", old, 0, 0) })
	result("old", "inflight", old)
	// kept: a provider-batch line still refers to the failed call.
	record("old", "lined", old, func() {
		a := attempt("old", "lined", "failed", old, 0, 0)
		exec(`INSERT INTO triage_provider_batch_line (key, job_id, batch, record_id, custom_id, attempt_id, body, state)
			VALUES ('k', $1, 'old', 'lined', 'c', $1, 'null', 'applied')`, a)
	})
	result("old", "lined", old)
	// kept: a failed call 40 days ago of a record answered only yesterday.
	record("old", "late", old, failed("old", "late", old))
	result("old", "late", day)
	// kept: the new batch, its failed call yesterday.
	record("new", "recent", day, failed("new", "recent", day))
	result("new", "recent", day)
}

// Retention prunes the failed calls that billed nothing of records
// answered longer ago than the age, and nothing else: not a call that
// billed, not the call that answered, not a record without a result, with
// a lost answer or a call in flight, nor a call a provider-batch line
// refers to. What `triage ledger` reports as spent and the tokens are
// unchanged, and so is everything it reports for the records kept.
func TestRunOncePrunesOldFailedAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	attemptsFixture(t, db)
	usage := func(batch string) ledger.ClassUsage {
		t.Helper()
		total, _, err := ledger.UsageByClass(ctx, db.Pool, ledger.AttemptFilter{Batch: batch})
		require.NoError(t, err)
		return total
	}
	beforeAll, beforeNew := usage(""), usage("new")

	res, err := newService(db).RunOnce(ctx)
	require.NoError(t, err)
	require.True(t, res.Ran)
	require.Equal(t, 2, res.Pruned.Attempts)

	type row struct {
		Batch, Record, Status string
	}
	rows, err := db.Pool.Query(ctx, `SELECT batch, record_id, status FROM triage_attempt ORDER BY id`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	require.Equal(t, []row{
		{"old", "gone", "ok"},
		{"old", "billed", "failed"}, {"old", "billed", "ok"},
		{"old", "dead", "failed"},
		{"old", "ambiguous", "failed"}, {"old", "ambiguous", "possibly_billed"}, {"old", "ambiguous", "ok"},
		{"old", "inflight", "failed"}, {"old", "inflight", "intent"}, {"old", "inflight", "ok"},
		{"old", "lined", "failed"}, {"old", "lined", "ok"},
		{"old", "late", "failed"}, {"old", "late", "ok"},
		{"new", "recent", "failed"}, {"new", "recent", "ok"},
	}, left, "only the two failed calls of the old answered record go")

	afterAll := usage("")
	require.Equal(t, beforeNew, usage("new"), "the kept records' ledger is unchanged")
	require.Equal(t, beforeAll.SpendUSD, afterAll.SpendUSD, "spend unchanged")
	require.Equal(t, beforeAll.PossiblyBilledUSD, afterAll.PossiblyBilledUSD, "possibly billed unchanged")
	require.Equal(t, beforeAll.InputTokens+beforeAll.OutputTokens, afterAll.InputTokens+afterAll.OutputTokens, "tokens unchanged")
	require.Equal(t, beforeAll.Records, afterAll.Records, "every record still counted")
	require.Equal(t, beforeAll.Calls-2, afterAll.Calls, "the two pruned calls are no longer counted")

	res, err = newService(db).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, retention.Result{Ran: true}, res, "nothing left to prune")
}

// Candidates that must stay never hide the ones behind them: with more
// than a chunk of old failed calls of a record without a result first,
// the failed call of an answered record after them still goes.
func TestRunOncePrunesAttemptsBehindAChunkOfKeptOnes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exec(`INSERT INTO triage_batch (id, pipeline, key, total) VALUES ('b', 'p', 'k', 2)`)
	exec(`INSERT INTO triage_record (batch, record_id, line, data) VALUES ('b', 'dead', 1, '{}'), ('b', 'done', 2, '{}')`)
	insert := `INSERT INTO triage_attempt (batch, record_id, job_id, attempt, key, model, idempotency_key, request_hash,
			status, class, started_at, finished_at)
		SELECT 'b', $1, 1, 1, 'k', 'm', 'i', 'h', $2, $3, now() - $4::interval, now() - $4::interval
		FROM generate_series(1, $5::int)`
	exec(insert, "dead", "failed", "throttled", (41 * day).String(), ledger.PruneChunk+5)
	exec(insert, "done", "failed", "throttled", (40 * day).String(), 1)
	exec(insert, "done", "ok", "ok", (40 * day).String(), 1)
	exec(`INSERT INTO triage_result (batch, record_id, output, attempt_id, completed_at)
		SELECT 'b', 'done', '{}', max(id), now() - interval '40 days' FROM triage_attempt`)

	res, err := newService(db).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Pruned.Attempts)
	var left int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM triage_attempt WHERE record_id = 'done'`).Scan(&left))
	require.Equal(t, 1, left, "only the answer is left of the answered record")
}
