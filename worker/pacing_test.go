package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/keys"
)

// Two processes sharing a key pace at half its limit each, so together
// they stay under it (the provider refuses next to nothing: a late timer on
// a loaded machine can bunch two calls); when one is killed, its heartbeat
// expires and the other takes up the whole limit within seconds.
func TestTwoProcessesShareAKeysLimit(t *testing.T) {
	t.Parallel()
	const rpm = 1200 // 20 requests/s
	b := setup(t, fakeprovider.Scenario{
		RateLimit: &fakeprovider.RateLimit{RequestsPerMinute: rpm, BurstRequests: 10},
		Latency:   fakeprovider.Duration(20 * time.Millisecond),
	}, tweaks{concurrency: 8})
	b.opts.PacerHeartbeat = 300 * time.Millisecond
	b.enqueue(t, "b1", records(300, nil))
	a := b.startWith(t, b.cfg, "proc-a")
	c := b.startWith(t, b.cfg, "proc-c")

	limit := float64(rpm) / 60
	half := func(st keys.PaceState) bool {
		return st.Live == 2 && st.Source == keys.PaceHeaders &&
			st.ShareRate > 0.45*limit && st.ShareRate < 0.5*limit
	}
	eventually(t, 60*time.Second, "both pace at half the limit", func() bool {
		sa, _ := a.Pacing("main")
		sc, _ := c.Pacing("main")
		return half(sa) && half(sc)
	})
	// The waits are bounds, not durations: at 20 requests a second forty
	// calls take two, but at load 25 on two cores a run's CPU, not the
	// pace, sets the rate (10 s was too short there).
	before := b.fake.Stats().ByStatus[200]
	eventually(t, 60*time.Second, "forty more calls", func() bool { return b.fake.Stats().ByStatus[200] >= before+40 })
	underLimit := func(msg string) {
		s := b.fake.Stats()
		require.LessOrEqual(t, float64(s.ByStatus[429]), 0.02*float64(s.Requests), "%s: %d of %d refused", msg, s.ByStatus[429], s.Requests)
	}
	underLimit("together they stayed under the limit")

	// Kill a: no goodbye, its heartbeat row stays until it expires.
	killCtx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = a.Stop(killCtx)
	eventually(t, 60*time.Second, "c takes up a's share", func() bool {
		st, _ := c.Pacing("main")
		return st.Live == 1 && st.ShareRate > 0.9*limit
	})
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, 300, st.Completed)
	underLimit("alone at the whole limit, still under it")
}
