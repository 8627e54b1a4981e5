package ledger_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
)

// A key's pace is kept one row a step: the first process to reach a step
// writes it, the others find it written; the history reads back in order,
// for the key and the span asked.
func TestPaceHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t0 := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	limit := 10.0
	rec := func(key string, at time.Time, rate float64, lim *float64) {
		t.Helper()
		require.NoError(t, ledger.RecordPace(b.ctx, b.db.Pool, ledger.PacePoint{Key: key, At: at, Source: "headers", RatePerS: rate, LimitPerS: lim}))
	}
	rec("main", t0.Add(3*time.Second), 8, &limit)
	rec("main", t0.Add(7*time.Second), 9, &limit) // same step: kept as first written
	rec("main", t0.Add(12*time.Second), 6, nil)
	rec("other", t0.Add(12*time.Second), 1, nil)
	rec("main", t0.Add(time.Hour), 2, nil)

	got, err := ledger.PaceHistory(b.ctx, b.db.Pool, "main", t0, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.True(t, got[0].At.Equal(t0), "truncated to its step: %s", got[0].At)
	require.Equal(t, 8.0, got[0].RatePerS)
	require.Equal(t, &limit, got[0].LimitPerS)
	require.True(t, got[1].At.Equal(t0.Add(10*time.Second)))
	require.Equal(t, 6.0, got[1].RatePerS)
	require.Nil(t, got[1].LimitPerS)
}
