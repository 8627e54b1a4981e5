package worker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/workertest"
)

// otherEndpoint points a copy of the bundle's configuration at another fake
// provider: the same key name (so the same shared breaker, pause and queue),
// reached by a second process through its own endpoint. What that process
// does can then be counted separately.
func (b *testBundle) otherEndpoint(t *testing.T, h http.Handler) (*config.Config, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := *b.cfg
	cfg.Keys = append([]config.Key(nil), b.cfg.Keys...)
	cfg.Keys[0].BaseURL = srv.URL + "/v1"
	return &cfg, srv
}

func (b *testBundle) startWith(t *testing.T, cfg *config.Config, id string) *worker.Runtime {
	t.Helper()
	saved := b.opts
	b.opts.Config, b.opts.ID = cfg, id
	defer func() { b.opts = saved }()
	return b.start(t)
}

// An exhausted key seen by one process stops every other process from
// fetching its jobs within a second: the breaker and the queue pause live in
// PostgreSQL, not in the process that saw the error.
func TestFleetExhaustionStopsOtherProcessWithinASecond(t *testing.T) {
	t.Parallel()
	// Process A's endpoint runs out of balance once B is working; B's never
	// would, so B stops only because A told the fleet. A long probe interval
	// keeps probes out of the window measured.
	b := setup(t, fakeprovider.Scenario{}, tweaks{concurrency: 2, probeInterval: "1m"})
	healthy := fakeprovider.New(fakeprovider.Scenario{APIKey: "sk-test-secret"})
	t.Cleanup(func() { healthy.Close() })
	cfgB, _ := b.otherEndpoint(t, healthy)
	b.enqueue(t, "b1", records(400, nil))

	b.startWith(t, b.cfg, "proc-a")
	b.startWith(t, cfgB, "proc-b")
	// A newcomer's pacer holds its first calls for a heartbeat: run the
	// balance out only once B is calling, so B's stop is the fleet's doing.
	eventually(t, 30*time.Second, "process B is working", func() bool { return healthy.Stats().Requests > 0 })
	require.NoError(t, b.fake.SetScenario(fakeprovider.Scenario{APIKey: workertest.APIKey, Balance: &fakeprovider.Balance{USD: 0}}))

	var openedAt time.Time
	eventually(t, 30*time.Second, "process A trips the shared breaker", func() bool {
		st, err := keys.DefaultStore(b.db.Pool).KeyStatus(context.Background(), "main")
		require.NoError(t, err)
		if st.OpenedAt != nil {
			openedAt = *st.OpenedAt
		}
		return st.OpenedAt != nil
	})
	// Within a second of the breaker opening, B has stopped calling.
	eventually(t, 5*time.Second, "a second passes", func() bool { return time.Since(openedAt) > time.Second })
	before := healthy.Stats().Requests
	require.Positive(t, before, "process B was working before the breaker opened")
	window := time.Now().Add(2 * time.Second)
	eventually(t, 10*time.Second, "two more seconds pass", func() bool { return time.Now().After(window) })
	require.Equal(t, before, healthy.Stats().Requests, "process B made calls on an exhausted key after the fleet knew")

	st := b.status(t, "b1")
	require.Zero(t, st.DeadLettered)
	require.Less(t, st.Completed, 400)
}

// A pause set by a process that is then killed still ends on time: every
// process's Supervisor resumes what has expired.
func TestFleetPauseOfDeadProcessEndsOnTime(t *testing.T) {
	t.Parallel()
	const hint = 2 * time.Second
	b := setup(t, fakeprovider.Scenario{Script: steps(fakeprovider.Step{Action: fakeprovider.ActionRateLimit, RetryAfter: fakeprovider.Duration(hint)})},
		tweaks{concurrency: 1})
	var mu sync.Mutex
	var firstB time.Time
	healthy := fakeprovider.New(fakeprovider.Scenario{APIKey: "sk-test-secret"})
	t.Cleanup(func() { healthy.Close() })
	cfgB, _ := b.otherEndpoint(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if firstB.IsZero() {
			firstB = time.Now()
		}
		mu.Unlock()
		healthy.ServeHTTP(w, r)
	}))
	b.enqueue(t, "b1", records(10, nil))
	b.opts.KeyPauseAfter = time.Second // a 2 s retry-after: the whole key waits

	a := b.startWith(t, b.cfg, "proc-a")
	var until time.Time
	eventually(t, 10*time.Second, "process A pauses the key", func() bool {
		p, err := a.Store().ActivePause(context.Background(), "main")
		require.NoError(t, err)
		if p != nil {
			until = p.Until
		}
		return p != nil
	})
	// Kill A: cancel everything at once, no goodbye.
	killCtx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = a.Stop(killCtx)

	b.startWith(t, cfgB, "proc-b")
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 10, st.Completed)
	mu.Lock()
	defer mu.Unlock()
	require.False(t, firstB.Before(until.Add(-100*time.Millisecond)), "B called during the pause (first call %s, pause until %s)", firstB, until)
	require.Less(t, firstB.Sub(until), 1500*time.Millisecond, "the pause did not end on time (first call %s after its end)", firstB.Sub(until))
}
