package keys

import (
	"context"
	"sync"
)

// LimiterIncreaseEveryDefault is LimiterConfig.IncreaseEvery's default.
const LimiterIncreaseEveryDefault = 10

// LimiterConfig configures a Limiter.
type LimiterConfig struct {
	// Max is the concurrency ceiling (the key's `concurrency`). Values below
	// 1 are taken as 1.
	Max int
	// Initial is the starting limit. Default Max.
	Initial int
	// IncreaseEvery is how many successes raise the limit by one. Default
	// LimiterIncreaseEveryDefault.
	IncreaseEvery int
}

// Limiter is one key's in-process AIMD concurrency limit: OnThrottle halves
// it (floor 1), every IncreaseEvery calls of OnSuccess add one (up to Max).
// Lowering the limit does not stop calls already in flight; new Acquires wait
// until in-flight calls drop below it. Safe for concurrent use.
type Limiter struct {
	mu        sync.Mutex
	max       int
	every     int
	limit     int
	inFlight  int
	waiting   int // callers blocked in Acquire
	successes int
	changed   chan struct{} // closed and replaced when a slot may have freed
}

// NewLimiter returns a Limiter.
func NewLimiter(cfg LimiterConfig) *Limiter {
	if cfg.Max < 1 {
		cfg.Max = 1
	}
	if cfg.Initial < 1 || cfg.Initial > cfg.Max {
		cfg.Initial = cfg.Max
	}
	if cfg.IncreaseEvery < 1 {
		cfg.IncreaseEvery = LimiterIncreaseEveryDefault
	}
	return &Limiter{max: cfg.Max, every: cfg.IncreaseEvery, limit: cfg.Initial, changed: make(chan struct{})}
}

// Acquire waits for a slot under the current limit, or for ctx to end. The
// returned release gives the slot back; calling it more than once is
// harmless.
func (l *Limiter) Acquire(ctx context.Context) (release func(), err error) {
	for {
		l.mu.Lock()
		if l.inFlight < l.limit {
			l.inFlight++
			l.mu.Unlock()
			var once sync.Once
			return func() { once.Do(l.release) }, nil
		}
		ch := l.changed
		l.waiting++
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			l.unwait()
			return nil, ctx.Err()
		case <-ch:
			l.unwait()
		}
	}
}

func (l *Limiter) unwait() {
	l.mu.Lock()
	l.waiting--
	l.mu.Unlock()
}

// Waiting is how many callers are blocked in Acquire now.
func (l *Limiter) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

// TryAcquire takes a slot if one is free now, without waiting. A caller
// that had to wait instead (Acquire) knows time passed: what it checked
// before may have changed (the key tripped meanwhile).
func (l *Limiter) TryAcquire() (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight >= l.limit {
		return nil, false
	}
	l.inFlight++
	var once sync.Once
	return func() { once.Do(l.release) }, true
}

func (l *Limiter) release() {
	l.mu.Lock()
	l.inFlight--
	l.broadcastLocked()
	l.mu.Unlock()
}

func (l *Limiter) broadcastLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// OnThrottle halves the limit (floor 1) and restarts the success count.
func (l *Limiter) OnThrottle() {
	l.mu.Lock()
	l.limit = max(1, l.limit/2)
	l.successes = 0
	l.mu.Unlock()
}

// OnSuccess counts a success; every IncreaseEvery of them raise the limit by
// one, up to Max.
func (l *Limiter) OnSuccess() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.limit >= l.max {
		l.successes = 0
		return
	}
	l.successes++
	if l.successes >= l.every {
		l.successes = 0
		l.limit++
		l.broadcastLocked()
	}
}

// Current returns the current limit.
func (l *Limiter) Current() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit
}

// InFlight returns the number of slots held.
func (l *Limiter) InFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight
}
