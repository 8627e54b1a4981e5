package ledger_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
)

// A provider batch marked served (a line answered with a 2xx, marked at
// collection before any line's answer is stored) reads served from every
// one of its lines, in whatever order they are answered and applied; a
// line of another batch, or of none, does not.
func TestProviderBatchServedIsReadFromEachOfItsLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lines := batchLines(t, b, 0.1, nil, "a0", "a1", "a2", "b0", "pending")
	a, other, alone := lines[:3], lines[3:4], lines[4]
	ra := providerBatch(t, b, a, time.Now())
	providerBatch(t, b, other, time.Now())

	served := func(line int64) bool {
		t.Helper()
		ok, err := ledger.LineBatchServed(b.ctx, b.db.Pool, line)
		require.NoError(t, err)
		return ok
	}
	for _, l := range lines {
		require.False(t, served(l), "nothing answered yet: line %d", l)
	}
	require.False(t, served(1<<40), "no such line")

	// Collection: the batch is marked before its lines' answers are stored;
	// the rejected lines are stored (and applied) before the good one.
	require.NoError(t, ledger.MarkProviderBatchServed(b.ctx, b.db.Pool, ra.ID))
	require.NoError(t, ledger.MarkProviderBatchServed(b.ctx, b.db.Pool, ra.ID), "marked twice is marked")
	bad, _ := json.Marshal(ledger.BatchLineAnswer{})
	_, err := ledger.StoreLineOutcomes(b.ctx, b.db.Pool, ra.ID, []string{"a0", "a1"}, []string{ledger.LineAnswered, ledger.LineAnswered},
		[][]byte{bad, bad})
	require.NoError(t, err)
	require.True(t, served(a[0]), "a rejected line answered before the good one reads its batch served")
	require.NoError(t, ledger.CloseBatchLine(b.ctx, b.db.Pool, a[1]))
	require.True(t, served(a[1]), "and still once applied")
	require.True(t, served(a[2]), "the good line too")
	require.False(t, served(other[0]), "another batch is not served by this one")
	require.False(t, served(alone), "a line in no provider batch")
}
