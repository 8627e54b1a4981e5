package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/testclock"
	"github.com/triage-dev/triage/worker/workertest"
)

// The night: the provider goes down for five minutes in the middle
// of a 300-record batch worked by two processes. The storm breaker, shared
// through PostgreSQL, holds the fleet: no record is dead-lettered, none
// spends an attempt while it is open, the provider sees at most the calls
// in flight when it tripped plus one probe per cooldown, and the batch
// drains after the first probe that finds the provider back, without
// waiting for another cooldown.
func TestStormOutage(t *testing.T) {
	t.Parallel()
	const (
		n           = 300
		concurrency = 4 // per process
		processes   = 2
		outageFrom  = 60 // the outage starts with the provider's 60th request
		outage      = 5 * time.Minute
	)
	start := time.Now().UTC()
	clock := testclock.New(start)
	sc := fakeprovider.Scenario{Now: clock.Now, Outages: []fakeprovider.Outage{{
		FromRequest: outageFrom, Requests: 1 << 30, // from request 60 on...
		For: fakeprovider.Duration(outage), // ...for five minutes of the fake clock
	}}}
	b := setup(t, sc, tweaks{concurrency: concurrency,
		extraKey: "storm_probe_min = \"2s\"\nstorm_probe_max = \"60s\"\nstorm_alert_after = \"2m\"\n"})
	b.opts.Clock = clock
	b.opts.SpendCheck = 50 * time.Millisecond
	b.enqueue(t, "b1", records(n, nil))
	b.startWith(t, b.cfg, "w1")
	b.startWith(t, b.cfg, "w2")

	store, err := keys.NewStore(b.db.Pool, keys.StoreConfig{Clock: clock})
	require.NoError(t, err)
	storm := func() keys.StormStatus {
		st, err := store.KeyStatus(context.Background(), workertest.Key)
		require.NoError(t, err)
		return st.Storm
	}
	eventually(t, 30*time.Second, "the storm breaker opens", func() bool { return storm().State != keys.StateClosed })
	opened := b.fake.Stats().Requests

	// Let the fake clock run through the outage one cooldown at a time:
	// each time the next probe is due, move the clock there and wait for the
	// probe's failure to reopen the breaker (a new generation).
	probes := 0
	for {
		var s keys.StormStatus
		eventually(t, 20*time.Second, "the breaker is open with a probe time", func() bool {
			s = storm()
			return s.State == keys.StateOpen && s.NextProbe != nil
		})
		if !s.NextProbe.Before(start.Add(outage)) {
			break
		}
		clock.Set(*s.NextProbe)
		eventually(t, 20*time.Second, "the probe fails and the breaker reopens", func() bool {
			now := storm()
			require.NotEqual(t, keys.StateClosed, now.State, "the breaker stays open while the provider is down")
			return now.Generation > s.Generation
		})
		probes++
		require.Empty(t, b.deadLetters(t, "b1"), "nothing is dead-lettered while the breaker is open")
	}
	during := b.fake.Stats().Requests - (outageFrom - 1)
	t.Logf("outage: %d requests reached the provider (%d before the breaker opened, %d probes); cooldown at the end %.0fs",
		during, opened-(outageFrom-1), probes, storm().CooldownS)
	require.LessOrEqual(t, during, 2*concurrency*processes+probes,
		"requests during the outage: at most twice the fleet's concurrency plus one per cooldown")
	require.Equal(t, 60.0, storm().CooldownS, "the cooldown grew to storm_probe_max")
	require.Equal(t, 1, b.hooks.count(string(keys.AlertStormOpen)), "one alert for a storm open longer than storm_alert_after")

	// The provider is back; one more cooldown and the probe finds it. From
	// then on the clock stands still: the batch drains at once, waiting
	// for no cooldown (the clock would never reach it). Waited on while
	// records keep settling: 240 records took 5 s at load 20 and longer
	// at 40, past a fixed 20 s (timed out waiting for: batch b1 settles).
	s := storm()
	clock.Set(*s.NextProbe)
	st := workertest.WaitDrained(t, b.db.Pool, "b1", 20*time.Second)
	require.Equal(t, n, st.Completed, "every record completes")
	require.Empty(t, b.deadLetters(t, "b1"))
	require.Equal(t, keys.StateClosed, storm().State)

	// No job spent a River attempt, and no record more than the call in
	// flight when the breaker opened and one probe.
	var maxAttempt, maxCalls int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT max(attempt) FROM river_job`).Scan(&maxAttempt))
	require.Equal(t, 1, maxAttempt, "no River attempt was spent")
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT coalesce(max(c), 0) FROM (
		SELECT count(*) AS c FROM triage_attempt WHERE class = 'transient' GROUP BY record_id) x`).Scan(&maxCalls))
	require.LessOrEqual(t, maxCalls, 2, "a record fails at most twice: in flight at the trip, and as one probe")
}
