package nightsim_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The settle bound (settleBound) is time on a machine as fast as this run
// has seen it. On the shared 2-core development machine the load swings
// between 15 and 35 while a soak runs; in a starved stretch every database
// round trip and every goroutine waits its turn, a job's run takes seconds
// instead of tens of milliseconds, and a whole batch can stay unsettled
// past the bound although every record moves (seeds 160102 and 160104:
// River's average run 1–7 s for 90 s, where it was 60–130 ms in the same
// nights a minute earlier; the nights beside them settled in 35–44 s
// instead of 10 s). So the settle phase counts time at the machine's pace.
//
// The pace is measured outside the fleet: the breaker watcher reads two
// small rows every 20 ms all night (watchBreakers), a plain read that no
// lock of the fleet's can hold up (MVCC), so its latency rises only when
// the machine (CPU, the database server) is starved. The slowdown is the
// median read of the last paceWindow over the usual one: the median of
// every window's median this test process has seen, all night and in
// every night side by side (the machine's ordinary pace in this run), at
// least 1 and at most maxSlowdown. A second of settling at slowdown s
// counts as 1/s of a second of the bound. A night alone on an evenly slow
// machine, or a soak at its ordinary pace, has a slowdown of about 1: the
// bound of old, so a fleet that is stuck or crawls (one record a probe
// interval: seeds 60308, 120423) is caught as before; in a starved
// stretch, later (at most maxSlowdown times), never passed. (The best window
// is no reference: replays at load 39 read 0.33 ms at best and 1–2 ms
// most of the time, and settled in 10 s.)

const (
	// paceWindow is the span of reads whose median is the current pace.
	paceWindow = 5 * time.Second
	// paceEvery is how many reads the watcher makes between two windows it
	// adds to the process's usual pace.
	paceEvery = 50
	// paceMinReads is the fewest reads a window needs to tell a pace; one
	// with fewer (reads of a second and more, or failing) is starved.
	paceMinReads = 5
	// maxSlowdown caps the stretch: the settle phase lasts at most
	// maxSlowdown × the bound of wall time.
	maxSlowdown = 4.0
)

// usualPace is the median of the window medians of this test process.
var usualPace struct {
	mu      sync.Mutex
	medians []time.Duration
	usual   time.Duration
}

// notePace adds a window's median to the usual pace.
func notePace(med time.Duration) {
	usualPace.mu.Lock()
	defer usualPace.mu.Unlock()
	usualPace.medians = append(usualPace.medians, med)
	ds := slices.Clone(usualPace.medians)
	slices.Sort(ds)
	usualPace.usual = ds[len(ds)/2]
}

// readPace is the median latency of the watcher's reads that ended in the
// last paceWindow before now, and how many there were.
func readPace(samples []breakerSample, now time.Time) (time.Duration, int) {
	var ds []time.Duration
	for i := len(samples) - 1; i >= 0 && now.Sub(samples[i].to) <= paceWindow; i-- {
		ds = append(ds, samples[i].to.Sub(samples[i].from))
	}
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], len(ds)
}

// slowdown is how many times slower than usual the machine is now:
// median over usual, within [1, maxSlowdown]; maxSlowdown when the window
// has too few reads to tell.
func slowdown(median time.Duration, n int, usual time.Duration) float64 {
	switch {
	case n < paceMinReads:
		return maxSlowdown
	case usual <= 0 || median <= usual:
		return 1
	}
	return min(maxSlowdown, float64(median)/float64(usual))
}

// pace is the current slowdown, the window's median and the usual pace;
// fold adds the window to the usual pace (the watcher does, every
// paceEvery reads).
func (wt *watcher) pace(now time.Time, fold bool) (float64, time.Duration, time.Duration) {
	wt.mu.Lock()
	med, n := readPace(wt.samples, now)
	wt.mu.Unlock()
	if fold && n >= paceMinReads {
		notePace(med)
	}
	usualPace.mu.Lock()
	usual := usualPace.usual
	usualPace.mu.Unlock()
	return slowdown(med, n, usual), med, usual
}

func TestSlowdown(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name     string
		median   time.Duration
		n        int
		usual    time.Duration
		slowdown float64
	}{
		{"as fast as usual", 2 * ms, 250, 2 * ms, 1},
		{"faster than usual", ms, 250, 2 * ms, 1},
		{"no pace yet", 9 * ms, 250, 0, 1},
		{"three times slower", 6 * ms, 200, 2 * ms, 3},
		{"capped", 200 * ms, 25, 2 * ms, maxSlowdown},
		{"too few reads to tell", 0, 4, 2 * ms, maxSlowdown},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.InDelta(t, c.slowdown, slowdown(c.median, c.n, c.usual), 1e-9)
		})
	}
}

func TestReadPace(t *testing.T) {
	now := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	read := func(endAgo, took time.Duration) breakerSample {
		return breakerSample{from: now.Add(-endAgo - took), to: now.Add(-endAgo)}
	}
	samples := []breakerSample{
		read(9*time.Second, time.Second), // before the window
		read(4*time.Second, 3*time.Millisecond),
		read(3*time.Second, 40*time.Millisecond),
		read(time.Second, 5*time.Millisecond),
	}
	med, n := readPace(samples, now)
	require.Equal(t, 3, n)
	require.Equal(t, 5*time.Millisecond, med)
	_, n = readPace(nil, now)
	require.Zero(t, n)
}
