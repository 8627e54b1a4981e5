package keys

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/worker/testclock"
)

// virtualTimers runs goroutines that wait in virtual time: every wait is a
// timer on a testclock, and the clock moves to the next timer only once
// every goroutine is blocked on one (or done), so the run is the same at
// any speed and under any load.
type virtualTimers struct {
	clk     *testclock.Clock
	mu      sync.Mutex
	running int
	timers  []virtualTimer
	changed chan struct{}
}

type virtualTimer struct {
	at time.Time
	ch chan time.Time
}

func newVirtualTimers(clk *testclock.Clock, goroutines int) *virtualTimers {
	return &virtualTimers{clk: clk, running: goroutines, changed: make(chan struct{}, 1)}
}

func (v *virtualTimers) signal() {
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

// after is a timer in virtual time: the calling goroutine counts as
// blocked until it fires.
func (v *virtualTimers) after(d time.Duration) (<-chan time.Time, func() bool) {
	ch := make(chan time.Time, 1)
	v.mu.Lock()
	v.timers = append(v.timers, virtualTimer{at: v.clk.Now().Add(d), ch: ch})
	v.running--
	v.mu.Unlock()
	v.signal()
	return ch, func() bool { return false }
}

// done: one goroutine has finished.
func (v *virtualTimers) done() {
	v.mu.Lock()
	v.running--
	v.mu.Unlock()
	v.signal()
}

// run moves the clock from timer to timer until every goroutine is done.
func (v *virtualTimers) run(t *testing.T) {
	t.Helper()
	stuck := time.NewTimer(time.Minute) // a real-time safety net, not a wait
	defer stuck.Stop()
	for {
		v.mu.Lock()
		idle, left := v.running == 0, len(v.timers)
		v.mu.Unlock()
		if !idle {
			select {
			case <-v.changed:
			case <-stuck.C:
				t.Fatal("virtual timers: goroutines neither waited nor finished within a minute")
			}
			continue
		}
		if left == 0 {
			return
		}
		v.mu.Lock()
		next := v.timers[0].at
		for _, tm := range v.timers {
			if tm.at.Before(next) {
				next = tm.at
			}
		}
		v.clk.Set(next)
		kept := v.timers[:0]
		for _, tm := range v.timers {
			if tm.at.After(next) {
				kept = append(kept, tm)
				continue
			}
			v.running++
			tm.ch <- next
		}
		v.timers = kept
		v.mu.Unlock()
	}
}

// No pacing wait lasts longer than the maxWait it was given, whatever
// happens between its rounds: 60 callers at once against a key paced at a
// few calls a second, each coming back after the delay it was told (as a
// snoozed job does) until it gets its turn. A wait that gave its
// reservation back and found the line longer when it came back returns a
// PaceDelay instead of waiting on past its bound.
func TestPacerWaitNeverExceedsMaxWait(t *testing.T) {
	t.Parallel()
	const waiters = 60
	const maxWait = time.Second
	clk := testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	vt := newVirtualTimers(clk, waiters)
	p := newPacer(PacerConfig{InitialRate: 4, Concurrency: waiters}, clk.Now)
	p.after = vt.after

	var mu sync.Mutex
	var longest time.Duration
	over, granted := 0, 0
	var failed error
	ctx := context.Background()
	for range waiters {
		go func() {
			defer vt.done()
			for range 1000 {
				start := clk.Now()
				err := p.Wait(ctx, 10, maxWait)
				took := clk.Now().Sub(start)
				mu.Lock()
				longest = max(longest, took)
				if took > maxWait {
					over++
				}
				mu.Unlock()
				var pd *PaceDelay
				if !errors.As(err, &pd) {
					mu.Lock()
					if err != nil {
						failed = err
					} else {
						granted++
					}
					mu.Unlock()
					// The call's answer: the key keeps its pace.
					p.Observe(PaceOutcome{At: clk.Now(), Answered: true, OK: true, Latency: 200 * time.Millisecond})
					return
				}
				<-func() <-chan time.Time { ch, _ := vt.after(pd.Delay); return ch }()
			}
		}()
	}
	vt.run(t)
	require.NoError(t, failed)
	require.Equal(t, waiters, granted, "every caller got its turn")
	require.Zero(t, over, "waits longer than maxWait %s (longest %s)", maxWait, longest)
	require.LessOrEqual(t, longest, maxWait)
}

// movingNow is a clock that moves a little on every reading, as a real one
// does between Wait's start and its reservation.
type movingNow struct {
	mu sync.Mutex
	t  time.Time
}

func (m *movingNow) now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t = m.t.Add(time.Microsecond)
	return m.t
}

// A call whose turn is now passes even with no wait allowed at all: the
// bound refuses waits, not the time the reservation itself takes.
func TestPacerWaitWithNoWaitAllowedTakesAFreeSlot(t *testing.T) {
	t.Parallel()
	clk := &movingNow{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := newPacer(PacerConfig{InitialRate: 1}, clk.now)
	require.NoError(t, p.Wait(context.Background(), 1, 0), "the bucket's first token is there")
	var pd *PaceDelay
	require.ErrorAs(t, p.Wait(context.Background(), 1, 0), &pd, "the next is a second away")
	require.InDelta(t, time.Second, pd.Delay, float64(10*time.Millisecond))
}
