package keys

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLimiterAIMD(t *testing.T) {
	t.Parallel()
	l := NewLimiter(LimiterConfig{Max: 8, IncreaseEvery: 3})
	require.Equal(t, 8, l.Current())

	l.OnThrottle()
	require.Equal(t, 4, l.Current())
	l.OnThrottle()
	l.OnThrottle()
	require.Equal(t, 1, l.Current())
	l.OnThrottle()
	require.Equal(t, 1, l.Current(), "floor 1")

	l.OnSuccess()
	l.OnSuccess()
	require.Equal(t, 1, l.Current())
	l.OnSuccess()
	require.Equal(t, 2, l.Current())

	// A throttle restarts the success count.
	l.OnSuccess()
	l.OnSuccess()
	l.OnThrottle()
	l.OnSuccess()
	require.Equal(t, 1, l.Current())

	for range 100 {
		l.OnSuccess()
	}
	require.Equal(t, 8, l.Current(), "capped at Max")
}

func TestLimiterDefaults(t *testing.T) {
	t.Parallel()
	l := NewLimiter(LimiterConfig{Max: 0})
	require.Equal(t, 1, l.Current())
	l = NewLimiter(LimiterConfig{Max: 4, Initial: 2})
	require.Equal(t, 2, l.Current())
	for range LimiterIncreaseEveryDefault {
		l.OnSuccess()
	}
	require.Equal(t, 3, l.Current())
}

func TestLimiterAcquire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := NewLimiter(LimiterConfig{Max: 2, IncreaseEvery: 1})

	r1, err := l.Acquire(ctx)
	require.NoError(t, err)
	r2, err := l.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, l.InFlight())

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.Acquire(cctx)
	require.ErrorIs(t, err, context.Canceled)

	got := make(chan func())
	go func() {
		r, err := l.Acquire(ctx)
		if err == nil {
			got <- r
		}
	}()
	r1()
	r1() // twice: harmless
	r3 := <-got
	require.Equal(t, 2, l.InFlight())

	// Lowered below what is in flight: the next Acquire waits for two releases.
	l.OnThrottle()
	require.Equal(t, 1, l.Current())
	go func() {
		r, err := l.Acquire(ctx)
		if err == nil {
			got <- r
		}
	}()
	r2()
	select {
	case <-got:
		t.Fatal("acquired above the limit")
	default:
	}
	r3()
	r4 := <-got
	r4()
	require.Equal(t, 0, l.InFlight())
}

func TestLimiterNeverExceedsLimitUnderRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := NewLimiter(LimiterConfig{Max: 5, IncreaseEvery: 2})
	var (
		inFlight, peak atomic.Int64
		wg             sync.WaitGroup
	)
	for i := range 200 {
		wg.Go(func() {
			release, err := l.Acquire(ctx)
			require.NoError(t, err)
			n := inFlight.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			if i%7 == 0 {
				l.OnThrottle()
			} else {
				l.OnSuccess()
			}
			inFlight.Add(-1)
			release()
		})
	}
	wg.Wait()
	require.LessOrEqual(t, peak.Load(), int64(5))
	require.Equal(t, 0, l.InFlight())
	require.GreaterOrEqual(t, l.Current(), 1)
	require.LessOrEqual(t, l.Current(), 5)
}
