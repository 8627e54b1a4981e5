package ledger_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
)

// The run is one row per key, changed under a lock: concurrent changes from
// several pools (processes) all land, and a success resets it.
func TestWatchRunSharedAndReset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	add := func(rec string) {
		require.NoError(t, ledger.ChangeWatchRun(b.ctx, b.db.Pool, "main", func(r ledger.WatchRun) ledger.WatchRun {
			r.Fingerprint = "400 gate"
			r.Records = append(r.Records, rec)
			return r
		}))
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); add(string(rune('a' + i))) }()
	}
	wg.Wait()
	var got ledger.WatchRun
	read := func() {
		require.NoError(t, ledger.ChangeWatchRun(b.ctx, b.db.Pool, "main", func(r ledger.WatchRun) ledger.WatchRun { got = r; return r }))
	}
	read()
	require.Len(t, got.Records, 8, "no change lost: %v", got.Records)
	now := time.Now().UTC().Truncate(time.Millisecond)
	require.NoError(t, ledger.ChangeWatchRun(b.ctx, b.db.Pool, "main", func(r ledger.WatchRun) ledger.WatchRun {
		r.ThrottleSince, r.Throttles, r.ThrottleFP = &now, 2, "429 gate"
		return r
	}))
	read()
	require.Equal(t, 2, got.Throttles)
	require.True(t, now.Equal(*got.ThrottleSince))

	// A success answered before the run of throttles began, whose report
	// lands only now: the streak ends, the throttles' run goes on.
	require.NoError(t, ledger.ResetWatchRun(b.ctx, b.db.Pool, "main", now.Add(-time.Second)))
	read()
	require.Empty(t, got.Records)
	require.Equal(t, 2, got.Throttles, "a success before the throttles began does not end their run")
	require.True(t, now.Equal(*got.ThrottleSince))

	require.NoError(t, ledger.ResetWatchRun(b.ctx, b.db.Pool, "main", now))
	require.NoError(t, ledger.ResetWatchRun(b.ctx, b.db.Pool, "other", now), "a key with no run")
	read()
	require.Empty(t, got.Records)
	require.Zero(t, got.Throttles)
	require.Nil(t, got.ThrottleSince)
}
