package ledger_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
)

// A background response left running for a record dead-lettered cancelled
// is listed once however many attempts lost it; settling it puts the
// outcome and its cost on the newest attempt (counted in the key's spend
// once, even when several processes settle it at once) and resolves the
// older ones; a record requeued since is neither listed nor settled.
func TestLeftResponsesSettledOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 3)
	lost := func(record string, attempt int, responseID string) int64 {
		t.Helper()
		id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", record, attempt))
		require.NoError(t, err)
		require.NoError(t, ledger.SetAttemptResponseID(b.ctx, b.db.Pool, id, responseID))
		require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{
			Status: ledger.AttemptPossiblyBilled, Class: classify.Ambiguous, Reason: "stopped"}))
		return id
	}
	r1a, r1b := lost("r1", 1, "resp_1"), lost("r1", 2, "resp_1")
	lost("r2", 1, "resp_2")
	lost("r3", 1, "resp_3") // its record not dead-lettered: still wanted
	_, err := ledger.AddCancelledDeadLetters(b.ctx, b.db.Pool, "b1", "main", "cancelled by hand",
		[]ledger.CancelledRecord{{RecordID: "r1", JobID: 1, Pipeline: "enrich"}, {RecordID: "r2", JobID: 2, Pipeline: "enrich"}})
	require.NoError(t, err)

	left, err := ledger.LeftResponses(b.ctx, b.db.Pool, 10)
	require.NoError(t, err)
	require.Equal(t, []ledger.LeftResponse{
		{Key: "main", Model: "gpt-4o-mini", ResponseID: "resp_1", Batch: "b1", RecordID: "r1"},
		{Key: "main", Model: "gpt-4o-mini", ResponseID: "resp_2", Batch: "b1", RecordID: "r2"},
	}, left)

	ended := ledger.LeftOutcome{Reason: ledger.ReasonResponseEndedUnwanted, InputTokens: 10, OutputTokens: 20, CostUSD: 0.25}
	var wg sync.WaitGroup
	settled, errs := make([]int, 4), make([]error, 4)
	for i := range settled {
		wg.Add(1)
		go func() {
			defer wg.Done()
			settled[i], errs[i] = ledger.SettleLeftResponse(b.ctx, b.db.Pool, "main", "resp_1", ended)
		}()
	}
	wg.Wait()
	total := 0
	for i, n := range settled {
		require.NoError(t, errs[i])
		total += n
	}
	require.Equal(t, 2, total, "both attempts that lost resp_1 settled, by one process")
	row := func(id int64) (status, reason, resolution string, cost float64) {
		t.Helper()
		require.NoError(t, b.db.Pool.QueryRow(b.ctx, `SELECT status, coalesce(reason, ''), coalesce(resolution, ''), cost_usd::float8
			FROM triage_attempt WHERE id = $1`, id).Scan(&status, &reason, &resolution, &cost))
		return
	}
	status, reason, resolution, cost := row(r1b)
	require.Equal(t, []any{"failed", ledger.ReasonResponseEndedUnwanted, "found", 0.25}, []any{status, reason, resolution, cost})
	status, _, resolution, cost = row(r1a)
	require.Equal(t, []any{"resolved", "found", 0.0}, []any{status, resolution, cost})
	_, err = ledger.FoldSpend(b.ctx, b.db.Pool)
	require.NoError(t, err)
	spent, err := ledger.KeySpend(b.ctx, b.db.Pool, "main")
	require.NoError(t, err)
	require.InDelta(t, 0.25, spent, 1e-9, "the ended response's cost counted once")

	// r2 requeued since it was listed: its new job polls the id.
	_, err = b.db.Pool.Exec(b.ctx, `UPDATE triage_dead_letter SET requeued_at = now() WHERE record_id = 'r2'`)
	require.NoError(t, err)
	n, err := ledger.SettleLeftResponse(b.ctx, b.db.Pool, "main", "resp_2", ledger.LeftOutcome{Reason: ledger.ReasonResponseCancelled})
	require.NoError(t, err)
	require.Zero(t, n, "a requeued record's response is its new job's")
	left, err = ledger.LeftResponses(b.ctx, b.db.Pool, 10)
	require.NoError(t, err)
	require.Empty(t, left)
}
