package main

import (
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/worker"
)

// batchMeter counts what this process's worker spends per batch, from the
// worker's call events: a run's worker takes the key's queue, other
// batches' jobs included, and a person must be told (a 5-record run once
// made 310 calls for two abandoned batches and reported only its own
// spend).
type batchMeter struct {
	next worker.Observer // the observer it wraps; nil: none
	mu   sync.Mutex
	by   map[string]*batchUse
	// fresh are batches seen since the last Fresh, in order.
	fresh []string
	// ok counts the calls answered ok, by key: a key that has answered in
	// this process is not one that can never work.
	ok map[string]int
}

// batchUse is one batch's calls and spend by this process.
type batchUse struct {
	Calls   int
	CostUSD float64
}

func newBatchMeter(next worker.Observer) *batchMeter {
	return &batchMeter{next: next, by: map[string]*batchUse{}, ok: map[string]int{}}
}

// ObserveCall implements worker.Observer.
func (m *batchMeter) ObserveCall(c worker.CallEvent) {
	if m.next != nil {
		m.next.ObserveCall(c)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.by[c.Batch]
	if u == nil {
		u = &batchUse{}
		m.by[c.Batch] = u
		m.fresh = append(m.fresh, c.Batch)
	}
	u.Calls++
	u.CostUSD += c.CostUSD
	if c.Class == classify.OK {
		m.ok[c.Key]++
	}
}

// Succeeded reports whether key answered a call ok in this process.
func (m *batchMeter) Succeeded(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ok[key] > 0
}

// Fresh returns the batches whose first call since the last Fresh was
// made, in order.
func (m *batchMeter) Fresh() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.fresh
	m.fresh = nil
	return f
}

// Others returns the use of every batch but own, by batch id.
func (m *batchMeter) Others(own string) map[string]batchUse {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]batchUse{}
	for b, u := range m.by {
		if b != own {
			out[b] = *u
		}
	}
	return out
}

// writeOthers prints, for a run's summary, what its worker spent on other
// batches meanwhile; nothing when it worked its own batch only.
func writeOthers(w io.Writer, others map[string]batchUse) {
	if len(others) == 0 {
		return
	}
	ids := make([]string, 0, len(others))
	var calls int
	var cost float64
	for b, u := range others {
		ids = append(ids, b)
		calls += u.Calls
		cost += u.CostUSD
	}
	sort.Strings(ids)
	fmt.Fprintf(w, "\nthis worker also made %d %s for other batches queued on its keys, %s (not in the table above):\n",
		calls, plural(calls, "call", "calls"), usd(cost))
	for _, b := range ids {
		u := others[b]
		fmt.Fprintf(w, "  %s: %d %s, %s\n", safe(b), u.Calls, plural(u.Calls, "call", "calls"), usd(u.CostUSD))
	}
}

// otherBatchNote is the progress event when a run's worker starts on a
// batch other than its own.
func otherBatchNote(other, own string) string {
	return fmt.Sprintf("also working batch %s, queued earlier on the same key: its calls and spend are its own, not batch %s's "+
		"(`triage batch pause %s` or `triage batch cancel %s` stops it)", safe(other), own, safe(other), safe(other))
}
