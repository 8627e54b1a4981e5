package ledger_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
)

// An answered call's ledger writes are one statement in the batch that
// begins the completion's transaction: the attempt finished with its cost
// as a spend delta, the record's result, the cache row, and the earlier
// lost sends under the key resolved, but not the attempt itself.
func TestSettleAnswerInTheBatchThatBeginsTheTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 2)
	lost, err := ledger.ReserveAttempt(b.ctx, b.db.Pool, intent("b1", "r1", 1))
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, lost, ledger.Outcome{
		Status: ledger.AttemptPossiblyBilled, Class: classify.Ambiguous, Reason: ledger.ReasonWorkerStopped}))
	id, err := ledger.ReserveAttempt(b.ctx, b.db.Pool, intent("b1", "r1", 2))
	require.NoError(t, err)

	settle := func(a ledger.Answer) error {
		var batch pgx.Batch
		batch.BeginTx(pgx.TxOptions{})
		if err := ledger.QueueSettleAnswer(&batch, a); err != nil {
			return err
		}
		br := b.db.Pool.SendBatch(b.ctx, &batch)
		tx := br.Tx()
		defer tx.Rollback(b.ctx) //nolint:errcheck
		if err := br.Close(); err != nil {
			return err
		}
		return tx.Commit(b.ctx)
	}
	answer := ledger.Answer{AttemptID: id, Outcome: ledger.Outcome{Status: ledger.AttemptOK, Class: classify.OK,
		HTTPStatus: 200, InputTokens: 10, OutputTokens: 5, CostUSD: 0.002},
		Batch: "b1", RecordID: "r1", Output: json.RawMessage(`{"a":1}`),
		Cache:   ledger.CacheEntry{Key: "ck", TTL: time.Hour},
		Resolve: true, IdempotencyKey: "b1/r1"}
	require.NoError(t, settle(answer))

	atts, err := ledger.ListAttempts(b.ctx, b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, atts, 2)
	byID := map[int64]ledger.Attempt{atts[0].ID: atts[0], atts[1].ID: atts[1]}
	require.Equal(t, ledger.AttemptOK, byID[id].Status)
	require.InDelta(t, 0.002, byID[id].CostUSD, 1e-12)
	require.Equal(t, ledger.AttemptResolved, byID[lost].Status, "the lost send is settled as billed once")
	has, err := ledger.HasResult(b.ctx, b.db.Pool, "b1", "r1")
	require.NoError(t, err)
	require.True(t, has)
	var spend float64
	require.NoError(t, b.db.Pool.QueryRow(b.ctx, `SELECT coalesce(sum(cost_usd), 0)::float8 FROM triage_spend_delta WHERE batch = 'b1'`).Scan(&spend))
	require.InDelta(t, 0.002, spend, 1e-12)
	hit, err := ledger.LookupResponse(b.ctx, b.db.Pool, "ck", time.Time{})
	require.NoError(t, err)
	require.True(t, hit.Hit)

	// An attempt finished already: the error FinishAttempt gives, and the
	// transaction writes nothing (the result of r2 is not stored).
	other, err := ledger.ReserveAttempt(b.ctx, b.db.Pool, intent("b1", "r2", 1))
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, other, ledger.Outcome{Status: ledger.AttemptFailed, Class: classify.Transient}))
	again := answer
	again.AttemptID, again.RecordID, again.IdempotencyKey, again.Cache = other, "r2", "b1/r2", ledger.CacheEntry{}
	require.ErrorIs(t, settle(again), ledger.ErrAttemptFinished)
	has, err = ledger.HasResult(b.ctx, b.db.Pool, "b1", "r2")
	require.NoError(t, err)
	require.False(t, has)

	bad := answer
	bad.Outcome.Status = ledger.AttemptIntent
	require.ErrorContains(t, settle(bad), "is not an outcome")
}
