package main

import (
	"time"

	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/decide"
)

// dbWaitDefault is how long `triage run` waits for an unreachable database
// before it stops with exit 4 (--db-wait). The jobs are in the database, so
// nothing is lost by stopping; waiting longer only keeps a terminal busy.
const dbWaitDefault = 60 * time.Second

// Backoff between status polls while the database is unreachable: the
// fleet's backoff (decide.Backoff) from the first to the most.
const (
	dbRetryFirst = 250 * time.Millisecond
	dbRetryMax   = 5 * time.Second
)

// outage follows an unreachable database across a poll loop.
type outage struct {
	limit time.Duration
	since time.Time // zero: reachable
	tries int       // failed polls since
}

// failed records a poll that could not reach the database at now. It says
// how long to wait before the next poll, whether this is the first failure
// of the outage (say so once) and whether the outage has lasted past limit.
func (o *outage) failed(now time.Time) (wait time.Duration, first, over bool) {
	if o.since.IsZero() {
		o.since, o.tries, first = now, 0, true
	}
	o.tries++
	over = o.limit > 0 && now.Sub(o.since) >= o.limit
	return decide.Backoff(o.tries, dbRetryFirst, dbRetryMax), first, over
}

// reached records a poll that reached the database and returns how long it
// had been unreachable (0: it was not).
func (o *outage) reached(now time.Time) time.Duration {
	if o.since.IsZero() {
		return 0
	}
	d := now.Sub(o.since)
	o.since = time.Time{}
	return d
}

// stopGraceFor is how long a run's worker may take to stop. After an
// outage it is long enough for the answers already received to be stored
// when the database comes back (the worker holds them that long), so
// stopping the run never throws away what was paid for.
func stopGraceFor(out runOutcome, opts worker.Options, stopGrace time.Duration) time.Duration {
	if !out.dbDown {
		return stopGrace
	}
	return max(stopGrace, opts.WithDefaults().HoldAnswer+5*time.Second)
}
