package nightsim_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/keys"
)

// The breaker invariants (5 and 8) need to know when the primary key's
// breakers were open. The fleet's processes keep that in the database
// (triage_key_state, triage_storm_state), so the world samples those rows
// all night and the fake provider times every billable request it gets
// (fakeprovider.Arrival): a request that arrived between two samples that
// both saw the same breaker open arrived while it was open.

// sampleEvery is how often the world reads the primary's breakers.
const sampleEvery = 20 * time.Millisecond

// breakerSample is one read of the primary's breakers, made between From
// and To (the read's start and end: the state held at some moment in
// between).
type breakerSample struct {
	from, to time.Time
	state    [2]string // exhausted, storm
	gen      [2]int64
}

// watcher samples the primary's breakers until stopped.
type watcher struct {
	mu      sync.Mutex
	samples []breakerSample
	stop    chan struct{}
	done    chan struct{}
}

func (w *world) watchBreakers() *watcher {
	wt := &watcher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(wt.done)
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for i := 1; ; i++ {
			if i%paceEvery == 0 {
				wt.pace(time.Now(), true) // the usual pace, all night (pace_test.go)
			}
			s := breakerSample{from: time.Now()}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := w.db.Pool.QueryRow(ctx, `SELECT coalesce(k.state, 'closed'), coalesce(k.generation, 0),
				coalesce(s.state, 'closed'), coalesce(s.generation, 0)
				FROM (SELECT 1) one
				LEFT JOIN triage_key_state k ON k.key = 'main'
				LEFT JOIN triage_storm_state s ON s.key = 'main'`).Scan(&s.state[0], &s.gen[0], &s.state[1], &s.gen[1])
			cancel()
			s.to = time.Now()
			if err == nil { // a read the database blip cut is no sample
				wt.mu.Lock()
				wt.samples = append(wt.samples, s)
				wt.mu.Unlock()
			}
			select {
			case <-wt.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return wt
}

func (wt *watcher) close() []breakerSample {
	close(wt.stop)
	<-wt.done
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return wt.samples
}

// openSpan is a stretch of time the breaker was seen open all along.
type openSpan struct {
	from, to time.Time
}

// openSpans are the spans in which breaker b (0 exhausted, 1 storm) was
// surely open: between the end of a read that saw it open (or half open,
// one probe out) and the start of a later read that saw it open in the
// same trip. A trip ends at a read that sees it closed, or at a generation
// that moved by two or more between reads (it may have closed and opened
// again in between: a probe that failed moves it by one).
func openSpans(samples []breakerSample, b int) []openSpan {
	var (
		out  []openSpan
		cur  *openSpan
		last breakerSample
	)
	flush := func() {
		if cur != nil && cur.to.After(cur.from) {
			out = append(out, *cur)
		}
		cur = nil
	}
	for _, s := range samples {
		open := s.state[b] != "closed"
		switch {
		case !open:
			flush()
		case cur == nil || s.gen[b]-last.gen[b] >= 2:
			flush()
			cur = &openSpan{from: s.to, to: s.to}
		default:
			cur.to = s.from
		}
		last = s
	}
	flush()
	return out
}

// breakerBound is what may reach the key in one open span: the requests
// admitted just before it opened that were still on their way (each
// process's concurrency of calls, and its submitter's one batch create),
// one probe per probe interval (a failed probe sets the next after the
// interval; a storm's cooldown only grows from its minimum), and a margin
// of 2 for a probe whose claim straddles a read.
func breakerBound(span openSpan, procs, concurrency int, interval time.Duration) int {
	probes := int(span.to.Sub(span.from)/interval) + 1
	return procs*(concurrency+1) + probes + 2
}

// checkBreakers is invariants 5 and 8: no billable request (a call, a
// batch create) reaches the primary while one of its breakers is open,
// beyond the requests in flight when it opened and its probes.
func (w *world) checkBreakers(samples []breakerSample, arrivals []fakeprovider.Arrival) []string {
	var v []string
	for b, name := range []string{"exhausted", "storm"} {
		interval := probeInterval
		if b == 1 {
			interval = keys.StormProbeMinDefault
		}
		for _, span := range openSpans(samples, b) {
			n := 0
			for _, a := range arrivals {
				if a.At.After(span.from) && a.At.Before(span.to) {
					n++
				}
			}
			if bound := breakerBound(span, w.n.Procs, w.n.Concurrency, interval); n > bound {
				v = append(v, fmt.Sprintf("the %s breaker was open from %.2fs to %.2fs and the primary got %d calls and batch creates; at most %d (calls in flight, a probe per %s)",
					name, span.from.Sub(w.start).Seconds(), span.to.Sub(w.start).Seconds(), n, bound, interval))
			}
		}
	}
	return v
}

// The spans a breaker was surely open: only between reads that both saw
// it open in one trip.
func TestOpenSpans(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	read := func(ms int, state string, gen int64) breakerSample {
		return breakerSample{from: at(ms), to: at(ms + 5), state: [2]string{state, "closed"}, gen: [2]int64{gen, 0}}
	}
	got := openSpans([]breakerSample{
		read(0, "closed", 0),
		read(20, "open", 1), read(40, "half_open", 1), read(60, "open", 2), read(80, "open", 2), // one trip, a failed probe
		read(100, "closed", 3),
		read(120, "open", 4), // a single read: no span
		read(140, "closed", 5),
		read(160, "open", 6), read(180, "open", 8), read(200, "open", 8), // closed and opened again between reads
	}, 0)
	require.Equal(t, []openSpan{{from: at(25), to: at(80)}, {from: at(185), to: at(200)}}, got)
	require.Empty(t, openSpans([]breakerSample{read(0, "open", 1), read(20, "open", 1)}, 1), "the storm breaker stayed closed")
}
