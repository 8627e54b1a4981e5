package ledger_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
)

// A cancel dead-letters the records whose jobs it took off the queue: a
// lost answer of such a record will not be sent again, so its resolution
// is dead_lettered, as when a worker dead-letters it, not left unknown.
// A lost answer of a record the cancel leaves alone (it has a result)
// keeps its resolution.
func TestCancelDeadLettersResolveTheLostAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 3)
	lost := func(record string) int64 {
		t.Helper()
		id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, intent("b1", record, 1))
		require.NoError(t, err)
		require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{
			Status: ledger.AttemptPossiblyBilled, Class: classify.Ambiguous, Reason: "timeout"}))
		return id
	}
	r1, r3 := lost("r1"), lost("r3")
	_, err := b.db.Pool.Exec(b.ctx, `INSERT INTO triage_result (batch, record_id, output, attempt_id) VALUES ('b1', 'r3', '{}', $1)`, r3)
	require.NoError(t, err)

	n, err := ledger.AddCancelledDeadLetters(b.ctx, b.db.Pool, "b1", "main", "cancelled by hand",
		[]ledger.CancelledRecord{{RecordID: "r1", JobID: 1, Pipeline: "enrich"}, {RecordID: "r2", JobID: 2, Pipeline: "enrich"},
			{RecordID: "r3", JobID: 3, Pipeline: "enrich"}})
	require.NoError(t, err)
	require.Equal(t, 2, n, "r1 and r2 dead-lettered; r3 has a result")

	res := func(id int64) string {
		var s *string
		require.NoError(t, b.db.Pool.QueryRow(b.ctx, `SELECT resolution FROM triage_attempt WHERE id = $1`, id).Scan(&s))
		if s == nil {
			return ""
		}
		return *s
	}
	require.Equal(t, "dead_lettered", res(r1), "the cancelled record's lost answer is resolved")
	require.Equal(t, "unknown", res(r3), "a record with a result keeps its resolution")
}
