package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/worker/config"
)

func TestJitter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		d         time.Duration
		low, high float64
		lo, hi    time.Duration
	}{
		{"equal jitter: half fixed, half random", 10 * time.Second, 0.5, 1, 5 * time.Second, 10 * time.Second},
		{"around a tick", time.Second, 0.8, 1.2, 800 * time.Millisecond, 1200 * time.Millisecond},
		{"a little later only", time.Hour, 1, 1.1, time.Hour, 66 * time.Minute},
		{"a short recheck", 30 * time.Second, 0.1, 0.2, 3 * time.Second, 6 * time.Second},
		{"nothing to spread", 0, 0.5, 1.5, 0, 0},
		{"an empty range is its low end", time.Second, 1, 1, time.Second, time.Second},
		{"a range upside down is its low end", time.Second, 1.2, 0.8, 1200 * time.Millisecond, 1200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seen := map[time.Duration]bool{}
			for range 200 {
				d := Jitter(tc.d, tc.low, tc.high)
				require.GreaterOrEqual(t, d, tc.lo)
				require.LessOrEqual(t, d, tc.hi)
				seen[d] = true
			}
			if tc.hi > tc.lo {
				require.Greater(t, len(seen), 1, "spread, not one value")
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempt int
		full    time.Duration
	}{
		{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {9, 256 * time.Second}, {10, 5 * time.Minute}, {50, 5 * time.Minute},
	} {
		for range 50 {
			d := Backoff(tc.attempt, time.Second, 5*time.Minute)
			require.GreaterOrEqual(t, d, tc.full/2, "attempt %d", tc.attempt)
			require.LessOrEqual(t, d, tc.full, "attempt %d", tc.attempt)
		}
	}
}

func TestRetryBudget(t *testing.T) {
	t.Parallel()
	rb := RetryBudget{Window: time.Minute, Floor: 10}
	for _, tc := range []struct {
		name        string
		share       float64
		first, open int
		allowed     int
		spent       bool
	}{
		{"a quiet key retries up to the floor", 0.2, 3, 9, 10, false},
		{"the floor reached", 0.2, 3, 10, 10, true},
		{"a busy key: the share of first calls, rounded up", 0.2, 101, 20, 21, false},
		{"the share reached", 0.2, 100, 20, 20, true},
		{"retry_budget 0: no retry at all", 0, 1000, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.allowed, rb.Allowed(tc.share, tc.first))
			require.Equal(t, tc.spent, rb.Spent(tc.share, tc.first, tc.open))
		})
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.Equal(t, now.Add(-time.Minute), rb.Since(now))
	require.Equal(t, RetryBudget{Window: RetryWindowDefault, Floor: RetryFloorDefault}, RetryBudgetDefault)
}

func TestBatchDeadlineNear(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	auto := &config.Pipeline{Mode: config.ModeAuto, AutoMargin: 3 * time.Hour}
	in := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	require.True(t, BatchDeadlineNear(auto, in(time.Hour), now))
	require.True(t, BatchDeadlineNear(auto, in(-time.Hour), now), "past its deadline")
	require.False(t, BatchDeadlineNear(auto, in(3*time.Hour), now), "exactly the margin away: not yet")
	require.False(t, BatchDeadlineNear(auto, nil, now), "no deadline")
	require.False(t, BatchDeadlineNear(&config.Pipeline{Mode: config.ModeBatch, AutoMargin: 3 * time.Hour}, in(time.Minute), now),
		"mode batch never goes sync")
}
