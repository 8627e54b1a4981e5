package keys

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/testclock"
)

type testBundle struct {
	db    *dbtest.DB
	clock *testclock.Clock
	store *Store
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	db := dbtest.New(t, dbtest.Options{MaxConns: 20})
	clock := testclock.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	store, err := NewStore(db.Pool, StoreConfig{Clock: clock, Owner: "test-1"})
	require.NoError(t, err)
	return &testBundle{db: db, clock: clock, store: store}
}

// secondPool opens another pool on the test's schema: another process.
func secondPool(t *testing.T, db *dbtest.DB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), db.URL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", timeout, msg)
		}
		<-tick.C
	}
}

// PauseFor measures the pause on the Store's clock, not the caller's.
func TestPauseForUsesTheStoreClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	p, err := b.store.PauseFor(ctx, "main", "throttled", 90*time.Second)
	require.NoError(t, err)
	require.WithinDuration(t, b.clock.Now().Add(90*time.Second), p.Until, time.Millisecond)
	// It extends, never shortens, like Pause.
	p, err = b.store.PauseFor(ctx, "main", "throttled", time.Second)
	require.NoError(t, err)
	require.WithinDuration(t, b.clock.Now().Add(90*time.Second), p.Until, time.Millisecond)
}

// AdmitCall reads the breaker and the active pause in one statement; on a
// closed breaker it reports the pause, and an ended pause is none.
func TestAdmitCallReportsThePause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	adm, pause, err := b.store.AdmitCall(ctx, "main", 1)
	require.NoError(t, err)
	require.True(t, adm.Allowed)
	require.Nil(t, pause)

	_, err = b.store.PauseFor(ctx, "main", PauseThrottled, time.Minute)
	require.NoError(t, err)
	adm, pause, err = b.store.AdmitCall(ctx, "main", 1)
	require.NoError(t, err)
	require.True(t, adm.Allowed)
	require.NotNil(t, pause)
	require.Equal(t, PauseThrottled, pause.Reason)
	require.Equal(t, "main", pause.Key)
	require.WithinDuration(t, b.clock.Now().Add(time.Minute), pause.Until, time.Millisecond)

	b.clock.Advance(2 * time.Minute)
	_, pause, err = b.store.AdmitCall(ctx, "main", 1)
	require.NoError(t, err)
	require.Nil(t, pause, "an ended pause is no pause")
}
