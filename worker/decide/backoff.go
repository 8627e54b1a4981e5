package decide

import (
	"math/rand/v2"
	"time"
)

// Backoff is base·2^(attempt-1) capped, with "equal jitter": half fixed,
// half random, so retries spread out but never collapse to zero.
func Backoff(attempt int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	return Jitter(min(d, limit), 0.5, 1)
}

// Jitter is the one source of spread in the fleet's waits: a duration
// drawn evenly between low·d and high·d (both included), so that processes
// and jobs that started together do not wake together. Every jittered
// wait (a backoff, a recheck, a loop's tick) is drawn here. A range that
// is empty or negative (d ≤ 0, high < low) yields low·d.
func Jitter(d time.Duration, low, high float64) time.Duration {
	lo := time.Duration(float64(d) * low)
	hi := time.Duration(float64(d) * high)
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo+1)
}
