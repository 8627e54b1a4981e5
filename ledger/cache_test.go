package ledger_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
)

func TestResponseCacheStoreLookupExpireSweep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batch(t, "b1", 2)
	b.batch(t, "b2", 2)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	in := intent("b1", "r1", 1)
	in.Now = t0
	id, err := ledger.BeginAttempt(b.ctx, b.db.Pool, in)
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(b.ctx, b.db.Pool, id, ledger.Outcome{Status: ledger.AttemptOK, CostUSD: 0.02}))
	out := json.RawMessage(`{"label":"a"}`)
	entry := ledger.CacheEntry{Key: "k1", TTL: time.Hour, Now: t0}
	require.NoError(t, ledger.StoreResultCached(b.ctx, b.db.Pool, "b1", "r1", id, out, entry))

	got, err := ledger.LookupResponse(b.ctx, b.db.Pool, "k1", t0.Add(59*time.Minute))
	require.NoError(t, err)
	require.True(t, got.Hit)
	require.JSONEq(t, string(out), string(got.Output))
	require.Equal(t, id, got.AttemptID)
	miss, err := ledger.LookupResponse(b.ctx, b.db.Pool, "k2", t0)
	require.NoError(t, err)
	require.False(t, miss.Hit, "another request")
	expired, err := ledger.LookupResponse(b.ctx, b.db.Pool, "k1", t0.Add(time.Hour))
	require.NoError(t, err)
	require.False(t, expired.Hit, "expired at the TTL")

	// Another batch's record answered from it: a $0 ok attempt, reason
	// cache_hit, and the stored answer as its result.
	hitIn := intent("b2", "r1", 1)
	hitIn.Now = t0.Add(time.Minute)
	hitID, err := ledger.RecordCacheHit(b.ctx, b.db.Pool, hitIn, got.Output)
	require.NoError(t, err)
	atts, err := ledger.ListAttempts(b.ctx, b.db.Pool, ledger.AttemptFilter{Batch: "b2"})
	require.NoError(t, err)
	require.Len(t, atts, 1)
	a := atts[0]
	require.Equal(t, hitID, a.ID)
	require.Equal(t, ledger.AttemptOK, a.Status)
	require.Equal(t, "ok", *a.Class)
	require.Equal(t, ledger.ReasonCacheHit, *a.Reason)
	require.Zero(t, a.CostUSD)
	require.Zero(t, a.EstCostUSD)
	require.Nil(t, a.HTTPStatus, "no call, no status")
	u, err := ledger.RetryUsageByKey(b.ctx, b.db.Pool, "main", t0.Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, u.FirstCalls, "a cache hit is no first call for the retry budget")
	st, err := ledger.BatchStatus(b.ctx, b.db.Pool, "b2")
	require.NoError(t, err)
	require.Equal(t, 1, st.Completed)
	require.Zero(t, st.SpendUSD)
	for row, err := range ledger.Results(b.ctx, b.db.Pool, "b2") {
		require.NoError(t, err)
		if row.ID == "r1" {
			require.JSONEq(t, string(out), string(row.Output))
			require.Equal(t, hitID, row.AttemptID)
		}
	}

	// A second cached row that lives longer; the sweep as of t0+1h deletes
	// only the expired one, and a sweep with nothing expired deletes none.
	require.NoError(t, ledger.StoreResultCached(b.ctx, b.db.Pool, "b1", "r2", id, out,
		ledger.CacheEntry{Key: "k3", TTL: 48 * time.Hour, Now: t0}))
	n, err := ledger.SweepResponseCache(b.ctx, b.db.Pool, t0.Add(time.Hour), 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = ledger.SweepResponseCache(b.ctx, b.db.Pool, t0.Add(time.Hour), 100)
	require.NoError(t, err)
	require.Zero(t, n)
	kept, err := ledger.LookupResponse(b.ctx, b.db.Pool, "k3", t0.Add(time.Hour))
	require.NoError(t, err)
	require.True(t, kept.Hit)

	// A newer answer replaces the stored one and restarts its TTL.
	out2 := json.RawMessage(`{"label":"b"}`)
	require.NoError(t, ledger.StoreResultCached(b.ctx, b.db.Pool, "b1", "r2", id, out2,
		ledger.CacheEntry{Key: "k1", TTL: time.Hour, Now: t0.Add(2 * time.Hour)}))
	fresh, err := ledger.LookupResponse(b.ctx, b.db.Pool, "k1", t0.Add(150*time.Minute))
	require.NoError(t, err)
	require.True(t, fresh.Hit)
	require.JSONEq(t, string(out2), string(fresh.Output))
}
