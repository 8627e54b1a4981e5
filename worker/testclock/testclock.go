// Package testclock is a clock that tests move by hand, so that minutes of
// outage, a provider batch's hours or a breaker's cooldown pass in a test
// without a sleep. Its Now method fits every clock triage injects
// (keys.Clock, fakeprovider.Scenario.Now, the submitter's clock).
package testclock

import (
	"sync"
	"time"
)

// Clock is safe for concurrent use: the code under test reads it from its
// own goroutines while the test moves it.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock standing at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set moves the clock to t, never backwards: time that code under test has
// already seen pass does not come back.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}
