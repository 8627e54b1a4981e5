package worker_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// The hold's race, forced: one call past the rejection streak's threshold
// opens the key's hold (trips its breaker) and is held there before it
// goes on; meanwhile another call of the wave in flight is rejected with
// the same error. That call's record waits for the key to resume like
// every record of the hold. The process used to note the hold only after
// the trip, so such a call found none and its record was dead-lettered:
// more dead letters than the wave in flight (17 of 16 once in CI).
func TestSafetyNetCallRacingTheHoldsOpenerWaits(t *testing.T) {
	t.Parallel()
	one := oneCallCost(t, "")
	const n, concurrency = 60, 8
	// Two calls are paid, then every call meets an account error no rule
	// knows; 50 ms of latency keeps the wave in flight while the hold opens.
	sc := fakeprovider.Scenario{NoReplay: true, Latency: fakeprovider.Duration(50 * time.Millisecond),
		Balance: &fakeprovider.Balance{USD: 2 * one * 0.999, Answer: unseenRequestError}}
	b := setup(t, sc, tweaks{concurrency: concurrency, probeInterval: "1h", extraKey: "suspect_rejections = 3\n"})
	opening := make(chan struct{}) // closed by the opener's trip
	// The wave, made sure of: the first three rejections (the streak's
	// threshold: the third opens the hold) are held until a fourth call
	// has been answered with the same error, and that one (and any later)
	// until the hold has opened. On a loaded machine the 50 ms of latency
	// alone did not always leave a call in flight at the trip ("no call of
	// the wave in flight was decided while the hold's opener was noting
	// it", 1 run in 3 at load 30).
	b.opts.HTTPClient = &http.Client{Transport: &waveHolder{opening: opening, fourth: make(chan struct{}), threshold: 3}}
	b.enqueue(t, "b1", records(n, nil))
	rt := b.newRuntime(t)

	var (
		mu        sync.Mutex
		opener    string
		waiting   bool // the opener is held right after its trip
		racer     string
		racerHold string
	)
	raced := make(chan struct{}) // closed by the first decision made meanwhile
	rt.SetWatchHooks(func(record string, opened bool) {
		mu.Lock()
		if !opened || opener != "" {
			mu.Unlock()
			return
		}
		opener, waiting = record, true
		mu.Unlock()
		close(opening)
		// The opener waits, right after its trip, for another call of
		// the wave in flight to be decided.
		select {
		case <-raced:
		case <-time.After(30 * time.Second):
		}
		mu.Lock()
		waiting = false
		mu.Unlock()
	}, func(record, hold string) {
		mu.Lock()
		defer mu.Unlock()
		if waiting && record != opener && racer == "" {
			racer, racerHold = record, hold
			close(raced)
		}
	})
	b.run(t, rt)

	select {
	case <-opening:
	case <-time.After(60 * time.Second):
		t.Fatal("no call opened the safety net's hold in 60 s")
	}
	select {
	case <-raced:
	case <-time.After(30 * time.Second):
		t.Fatal("no call of the wave in flight was decided while the hold's opener was noting it")
	}
	mu.Lock()
	rec, hold := racer, racerHold
	mu.Unlock()
	require.NotEmpty(t, hold, "record %s, rejected with the hold's error while the hold opened, is part of the hold", rec)

	// What the user sees: the racing record's job waits for the key to
	// resume; it has no dead letter.
	var state string
	eventually(t, 30*time.Second, "the racing record's run ends", func() bool {
		err := b.db.Pool.QueryRow(context.Background(),
			`SELECT state::text FROM river_job WHERE args->>'record_id' = $1`, rec).Scan(&state)
		return err == nil && state != "running"
	})
	var dead int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM triage_dead_letter WHERE record_id = $1`, rec).Scan(&dead))
	require.Zero(t, dead, "record %s (job %s) was dead-lettered although the key was held", rec, state)
	require.NotEqual(t, "cancelled", state)
	eventually(t, 30*time.Second, "the key_suspect alert", func() bool { return b.hooks.count("key_suspect") == 1 })
}

// waveHolder holds the answers of rejected calls (any non-2xx): the first
// threshold of them until one more has come back, that one and later ones
// until opening is closed (the hold opened), so that calls of the wave are
// in flight, their answers in hand, when the hold's opener trips.
type waveHolder struct {
	opening   <-chan struct{}
	fourth    chan struct{}
	threshold int

	mu       sync.Mutex
	rejected int
}

func (w *waveHolder) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || res.StatusCode < 300 {
		return res, err
	}
	w.mu.Lock()
	w.rejected++
	n := w.rejected
	if n == w.threshold+1 {
		close(w.fourth)
	}
	w.mu.Unlock()
	var wait <-chan struct{} = w.fourth
	if n > w.threshold {
		wait = w.opening
	}
	select {
	case <-wait:
	case <-r.Context().Done():
	case <-time.After(30 * time.Second):
	}
	return res, nil
}
