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

// A success answered before a streak's first rejection, whose report lands
// after it, does not end the streak; one answered after it does.
func TestWatchRunStreakOutlivesAnEarlierSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := time.Date(2026, 12, 2, 7, 0, 0, 123456789, time.UTC)
	var got ledger.WatchRun
	read := func() {
		require.NoError(t, ledger.ChangeWatchRun(b.ctx, b.db.Pool, "main", func(r ledger.WatchRun) ledger.WatchRun { got = r; return r }))
	}
	require.NoError(t, ledger.ChangeWatchRun(b.ctx, b.db.Pool, "main", func(r ledger.WatchRun) ledger.WatchRun {
		r.Fingerprint, r.Records, r.StreakSince = "400 gate", []string{"b1/r1", "b1/r2"}, &first
		return r
	}))
	read()
	require.Equal(t, []string{"b1/r1", "b1/r2"}, got.Records)
	require.NotNil(t, got.StreakSince)
	require.True(t, first.Equal(*got.StreakSince), "to the nanosecond: %s", got.StreakSince)

	require.NoError(t, ledger.ResetWatchRun(b.ctx, b.db.Pool, "main", first.Add(-time.Nanosecond)))
	read()
	require.Equal(t, []string{"b1/r1", "b1/r2"}, got.Records, "a success answered before the streak began does not end it")
	require.Equal(t, "400 gate", got.Fingerprint)

	require.NoError(t, ledger.ResetWatchRun(b.ctx, b.db.Pool, "main", first))
	read()
	require.Empty(t, got.Records, "a success answered with the streak's first rejection ends it")
	require.Empty(t, got.Fingerprint)
	require.Nil(t, got.StreakSince)

	// A streak stored without its start (before it was kept): any success
	// ends it, as then.
	require.NoError(t, ledger.ChangeWatchRun(b.ctx, b.db.Pool, "main", func(r ledger.WatchRun) ledger.WatchRun {
		r.Fingerprint, r.Records = "400 gate", []string{"b1/r1"}
		return r
	}))
	require.NoError(t, ledger.ResetWatchRun(b.ctx, b.db.Pool, "main", first.Add(-time.Hour)))
	read()
	require.Empty(t, got.Records)
}
