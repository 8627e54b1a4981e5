package worker_test

import (
	"context"
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
	b.enqueue(t, "b1", records(n, nil))
	rt := b.newRuntime(t)

	var (
		mu        sync.Mutex
		opener    string
		waiting   bool // the opener is held right after its trip
		racer     string
		racerHold string
	)
	opening := make(chan struct{}) // closed by the opener's trip
	raced := make(chan struct{})   // closed by the first decision made meanwhile
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
