package ledger_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
)

// A stray provider batch is a row of its own: recorded once (never over a
// batch another row recorded), collected under its lease, and each line it
// ran is a paid duplicate of its record, its cost in the spend, under a
// key of its own so that no read of the record's sends counts it.
func TestStrayBatchIsRecordedAndCollectedAsPaidDuplicates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, db := b.ctx, b.db
	now := time.Now().UTC().Truncate(time.Microsecond)
	triageID := func(record string) string { return "triage-" + strings.TrimPrefix(record, "r") }
	lines := batchLines(t, b, 0.5, triageID, "r1", "r2", "r3")
	r := providerBatch(t, b, lines, now.Add(-time.Minute))
	// The row's new owner records its own batch; the old owner's lands.
	require.NoError(t, ledger.RecordSubmitted(ctx, db.Pool, r, ledger.SubmittedBatch{ProviderID: "msgbatch_new", Counts: []byte(`{}`)}, now, now))

	_, recorded, err := ledger.RecordStrayBatch(ctx, db.Pool, r, lines, ledger.SubmittedBatch{ProviderID: "msgbatch_new"}, now, now)
	require.NoError(t, err)
	require.False(t, recorded, "the row's own batch is no stray")
	id, recorded, err := ledger.RecordStrayBatch(ctx, db.Pool, r, lines, ledger.SubmittedBatch{ProviderID: "msgbatch_old"}, now, now)
	require.NoError(t, err)
	require.True(t, recorded)
	_, again, err := ledger.RecordStrayBatch(ctx, db.Pool, r, lines, ledger.SubmittedBatch{ProviderID: "msgbatch_old"}, now, now)
	require.NoError(t, err)
	require.False(t, again, "recorded once")
	known, err := ledger.ProviderBatchRecorded(ctx, db.Pool, "k", "msgbatch_old", r.ID)
	require.NoError(t, err)
	require.True(t, known, "a look-up for the row's batch does not take its stray")

	// The stray is claimed (it is due), cancel asked for, and holds no line.
	var s ledger.ProviderBatch
	for {
		c, ok, err := ledger.ClaimProviderBatch(ctx, db.Pool, "k", now.Add(time.Second), now.Add(time.Hour))
		require.NoError(t, err)
		require.True(t, ok, "the stray row is due")
		if c.ID == id {
			s = c
			break
		}
	}
	require.NotNil(t, s.StrayOf)
	require.Equal(t, r.ID, *s.StrayOf)
	require.True(t, s.CancelRequested)
	held, err := ledger.ProviderBatchLines(ctx, db.Pool, id)
	require.NoError(t, err)
	require.Empty(t, held, "the lines stay the original row's")
	atts, err := ledger.StrayAttempts(ctx, db.Pool, id)
	require.NoError(t, err)
	require.Len(t, atts, 3)

	sync := 0.2
	dups := []ledger.PaidDuplicate{
		{Of: atts[0].ID, Outcome: ledger.Outcome{Status: ledger.AttemptOK, Class: classify.OK, HTTPStatus: 200,
			Reason: ledger.ReasonStrayDuplicate, InputTokens: 10, OutputTokens: 5, CostUSD: 0.1, SyncCostUSD: &sync}},
		{Of: atts[1].ID, Outcome: ledger.Outcome{Status: ledger.AttemptPossiblyBilled, Class: classify.Ambiguous,
			Reason: ledger.ReasonStrayDuplicate}},
	}
	stale := s
	stale.Lease = s.Lease.Add(-time.Second)
	err = ledger.CollectStrayBatch(ctx, db.Pool, stale, dups, now)
	require.True(t, errors.Is(err, ledger.ErrLeaseLost), "a lost lease collects nothing: %v", err)
	require.NoError(t, ledger.CollectStrayBatch(ctx, db.Pool, s, dups, now))
	err = ledger.CollectStrayBatch(ctx, db.Pool, s, dups, now)
	require.True(t, errors.Is(err, ledger.ErrLeaseLost), "collected once: %v", err)

	all, err := ledger.ListAttempts(ctx, db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	var got []ledger.Attempt
	for _, a := range all {
		if a.Reason != nil && *a.Reason == ledger.ReasonStrayDuplicate {
			got = append(got, a)
		}
	}
	require.Len(t, got, 2)
	byRecord := map[string]ledger.Attempt{}
	for _, a := range got {
		byRecord[a.RecordID] = a
		require.Equal(t, ledger.ModeBatch, a.Mode)
	}
	require.Equal(t, ledger.AttemptOK, byRecord["r1"].Status)
	require.Equal(t, int64(1), byRecord["r1"].JobID, "the duplicate is of the record's job")
	require.InDelta(t, 0.1, byRecord["r1"].CostUSD, 1e-12)
	require.Equal(t, ledger.StrayKey("triage-1", id), byRecord["r1"].IdempotencyKey)
	require.Equal(t, ledger.AttemptPossiblyBilled, byRecord["r2"].Status)
	require.InDelta(t, 0.5, byRecord["r2"].EstCostUSD, 1e-12, "possibly billed at the line's estimate")

	spent, err := ledger.KeySpend(ctx, db.Pool, "k")
	require.NoError(t, err)
	require.InDelta(t, 0.1, spent, 1e-12, "the duplicate's cost is in the spend")
	// The record's own sends are what they were: one intent.
	p, err := ledger.PriorOutcome(ctx, db.Pool, "triage-1")
	require.NoError(t, err)
	require.Equal(t, 1, p.Attempts)
	require.Zero(t, p.OKAttemptID)
	p, err = ledger.PriorOutcome(ctx, db.Pool, "triage-2")
	require.NoError(t, err)
	require.Equal(t, 1, p.Ambiguous, "its own intent only, not the duplicate")
}
