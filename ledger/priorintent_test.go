package ledger_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
)

// A first send gets its prior outcome and its intent in one statement,
// sent in the same round trip as another read (the breakers' admission in
// the worker); a second send under the key gets the prior only (the
// intent it sees counts as a lost answer) and goes through ReserveAttempt.
func TestPriorOutcomeAndIntentWritesTheIntentOfAFirstSend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 2)

	var (
		batch pgx.Batch
		pi    ledger.PriorIntent
		other int
	)
	batch.Queue(`SELECT 7`).QueryRow(func(row pgx.Row) error { return row.Scan(&other) })
	in := intent("b1", "r1", 1)
	ledger.QueuePriorOutcomeAndIntent(&batch, &pi, in)
	require.NoError(t, b.db.Pool.SendBatch(b.ctx, &batch).Close())
	require.Equal(t, 7, other)
	require.Equal(t, ledger.Prior{}, pi.Prior, "nothing before the first send")
	require.NotZero(t, pi.AttemptID)

	atts, err := ledger.ListAttempts(b.ctx, b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, atts, 1)
	a := atts[0]
	require.Equal(t, pi.AttemptID, a.ID)
	require.Equal(t, ledger.AttemptIntent, a.Status)
	require.Equal(t, []any{"r1", int64(42), "main", "gpt-4o-mini", "b1/r1"},
		[]any{a.RecordID, a.JobID, a.Key, a.Model, a.IdempotencyKey})

	// What PriorOutcomeForJob says now is what the combined read says.
	want, err := ledger.PriorOutcomeForJob(b.ctx, b.db.Pool, in.IdempotencyKey, in.JobID, "b1", "r1")
	require.NoError(t, err)
	again, err := ledger.PriorOutcomeAndIntent(b.ctx, b.db.Pool, intent("b1", "r1", 2))
	require.NoError(t, err)
	require.Equal(t, ledger.PriorIntent{Prior: want}, again, "no second intent under the key")
	require.Equal(t, 1, again.Prior.Ambiguous)
	require.True(t, again.Prior.JobLast.Unfinished)
	require.InDelta(t, 0.01, again.Prior.PossiblyBilledUSD, 1e-12, "the intent carries its estimate")

	// Settled, the record's next send reads the answer and writes nothing.
	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, pi.AttemptID, ledger.Outcome{
		Status: ledger.AttemptOK, Class: classify.OK, HTTPStatus: 200, CostUSD: 0.002}))
	again, err = ledger.PriorOutcomeAndIntent(b.ctx, b.db.Pool, intent("b1", "r1", 2))
	require.NoError(t, err)
	require.Zero(t, again.AttemptID)
	require.Equal(t, pi.AttemptID, again.Prior.OKAttemptID)
}

// No intent is written where ReserveAttempt or the caller's decision must
// come first: a batch with a spend cap, a batch paused by hand, a record
// with a dead letter in force.
func TestPriorOutcomeAndIntentLeavesTheHardCasesToReserveAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := b.db.Pool.Exec(b.ctx, sql, args...)
		require.NoError(t, err)
	}
	b.batch(t, "capped", 1)
	exec(`UPDATE triage_batch SET budget_usd = 10 WHERE id = 'capped'`)
	b.batch(t, "paused", 1)
	exec(`UPDATE triage_batch SET state = 'paused' WHERE id = 'paused'`)
	b.batch(t, "dead", 1)
	_, err := ledger.AddDeadLetter(b.ctx, b.db.Pool, ledger.DeadLetterRow{Batch: "dead", RecordID: "r1", Pipeline: "enrich",
		Key: "main", Class: classify.Rejected, Reason: "bad_request", Attempts: 1})
	require.NoError(t, err)

	for _, batch := range []string{"capped", "paused", "dead"} {
		pi, err := ledger.PriorOutcomeAndIntent(b.ctx, b.db.Pool, intent(batch, "r1", 1))
		require.NoError(t, err, batch)
		require.Zero(t, pi.AttemptID, batch)
		require.Equal(t, batch == "dead", pi.Prior.DeadLettered, batch)
	}
	var n int
	require.NoError(t, b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM triage_attempt`).Scan(&n))
	require.Zero(t, n, "no intent written")
}

// An intent written before the decision and not sent is withdrawn
// without a trace; a finished attempt, or one a line refers to, is not.
func TestWithdrawIntent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 3)
	pi, err := ledger.PriorOutcomeAndIntent(b.ctx, b.db.Pool, intent("b1", "r1", 1))
	require.NoError(t, err)
	require.NoError(t, ledger.WithdrawIntent(b.ctx, b.db.Pool, pi.AttemptID))
	again, err := ledger.PriorOutcomeAndIntent(b.ctx, b.db.Pool, intent("b1", "r1", 1))
	require.NoError(t, err)
	require.Equal(t, ledger.Prior{}, again.Prior, "the withdrawn intent is no lost answer")
	require.NotZero(t, again.AttemptID)

	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, again.AttemptID, ledger.Outcome{
		Status: ledger.AttemptFailed, Class: classify.Throttled, HTTPStatus: 429}))
	require.ErrorIs(t, ledger.WithdrawIntent(b.ctx, b.db.Pool, again.AttemptID), ledger.ErrAttemptFinished)
	require.ErrorIs(t, ledger.WithdrawIntent(b.ctx, b.db.Pool, 999999), ledger.ErrNotFound)

	lined, err := ledger.PriorOutcomeAndIntent(b.ctx, b.db.Pool, intent("b1", "r2", 1))
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(b.ctx, `INSERT INTO triage_provider_batch_line (key, job_id, batch, record_id, custom_id, attempt_id, body, state)
		VALUES ('main', 42, 'b1', 'r2', 'c', $1, '{}', 'pending')`, lined.AttemptID)
	require.NoError(t, err)
	require.ErrorContains(t, ledger.WithdrawIntent(b.ctx, b.db.Pool, lined.AttemptID), "line refers to it")
}
