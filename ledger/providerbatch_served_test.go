package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
)

// A provider batch marked served (a line answered with a 2xx, marked at
// collection before any line's answer is stored) reads served from every
// one of its lines, in whatever order they are answered and applied; a
// line of another batch, or of none, does not.
func TestProviderBatchServedIsReadFromEachOfItsLines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	job := int64(0)
	newLine := func(custom string) int64 {
		t.Helper()
		job++
		att, err := ledger.BeginAttempt(ctx, db.Pool, ledger.Intent{Batch: "b1", RecordID: custom, JobID: job,
			Attempt: 1, Key: "k", Model: "m", IdempotencyKey: custom, RequestHash: "h", EstCostUSD: 0.1, Mode: ledger.ModeBatch})
		require.NoError(t, err)
		id, err := ledger.AddBatchLine(ctx, db.Pool, ledger.NewBatchLine{Key: "k", Batch: "b1", RecordID: custom,
			JobID: job, CustomID: custom, AttemptID: att, Body: json.RawMessage(`{}`)})
		require.NoError(t, err)
		return id
	}
	var a, b []int64
	for i := range 3 {
		a = append(a, newLine(fmt.Sprintf("a%d", i)))
	}
	b = append(b, newLine("b0"))
	alone := newLine("pending")
	ra, err := ledger.CreateProviderBatch(ctx, db.Pool, ledger.NewProviderBatch{Key: "k", Vendor: "anthropic", Model: "m",
		Lines: a, NextPollAt: now})
	require.NoError(t, err)
	_, err = ledger.CreateProviderBatch(ctx, db.Pool, ledger.NewProviderBatch{Key: "k", Vendor: "anthropic", Model: "m",
		Lines: b, NextPollAt: now})
	require.NoError(t, err)

	served := func(line int64) bool {
		t.Helper()
		ok, err := ledger.LineBatchServed(ctx, db.Pool, line)
		require.NoError(t, err)
		return ok
	}
	for _, l := range append(append(a, b...), alone) {
		require.False(t, served(l), "nothing answered yet: line %d", l)
	}
	require.False(t, served(1<<40), "no such line")

	// Collection: the batch is marked before its lines' answers are stored;
	// the rejected lines are stored (and applied) before the good one.
	require.NoError(t, ledger.MarkProviderBatchServed(ctx, db.Pool, ra.ID))
	require.NoError(t, ledger.MarkProviderBatchServed(ctx, db.Pool, ra.ID), "marked twice is marked")
	bad, _ := json.Marshal(ledger.BatchLineAnswer{})
	_, err = ledger.StoreLineOutcomes(ctx, db.Pool, ra.ID, []string{"a0", "a1"}, []string{ledger.LineAnswered, ledger.LineAnswered},
		[][]byte{bad, bad})
	require.NoError(t, err)
	require.True(t, served(a[0]), "a rejected line answered before the good one reads its batch served")
	require.NoError(t, ledger.CloseBatchLine(ctx, db.Pool, a[1]))
	require.True(t, served(a[1]), "and still once applied")
	require.True(t, served(a[2]), "the good line too")
	require.False(t, served(b[0]), "another batch is not served by this one")
	require.False(t, served(alone), "a line in no provider batch")
}
