package nightsim_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/worker/nightsim"
)

// A seed is a night: the same seed and switches draw the same
// configuration and schedule, which is what makes a failing seed replay.
func TestPlanReplaysTheSameNight(t *testing.T) {
	t.Parallel()
	for seed := range int64(200) {
		require.Equal(t, nightsim.Plan(seed, nightsim.All), nightsim.Plan(seed, nightsim.All), "seed %d", seed)
		require.Equal(t, nightsim.Plan(seed, nightsim.Known).String(), nightsim.Plan(seed, nightsim.Known).String())
	}
	require.NotEqual(t, nightsim.Plan(1, nightsim.All).String(), nightsim.Plan(2, nightsim.All).String())
}

// A switched-off dimension is never drawn, and every night is one the
// configuration accepts and the world can play.
func TestPlanHonoursTheSwitches(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for seed := range int64(2000) {
		n := nightsim.Plan(seed, nightsim.Switches{})
		require.True(t, n.Procs >= 1 && n.Procs <= 3, "seed %d: %d processes", seed, n.Procs)
		require.True(t, n.Child < n.Procs, "seed %d", seed)
		require.False(t, n.Stream && n.Mode != "sync", "seed %d: streams need sync", seed)
		require.False(t, n.Fallback != "" && n.Mode != "sync", "seed %d: FallbackWithBatch is off", seed)
		require.False(t, n.AcceptPartial > 0 && n.Cache, "seed %d: PartialCache is off", seed)
		require.Zero(t, n.Skew, "seed %d: ClockSkew is off", seed)
		require.False(t, n.EchoKey, "seed %d: EchoKey is off", seed)
		last := n.Events[0:0]
		for _, e := range n.Events {
			require.True(t, e.At >= 0 && e.At <= n.Length, "seed %d: %s outside the night", seed, e)
			if len(last) > 0 {
				require.GreaterOrEqual(t, e.At, last[0].At, "seed %d: schedule in order", seed)
			}
			last = []nightsim.Event{e}
			switch e.Kind {
			case nightsim.Start:
				require.Equal(t, n.Mode, e.Mode, "seed %d: ModeSwitch is off", seed)
			case nightsim.BalanceLow:
				require.Equal(t, "sync", n.Mode, "seed %d: BatchExhausted is off", seed)
				require.Empty(t, n.Fallback, "seed %d: FallbackExhausted is off", seed)
			case nightsim.Operate:
				if e.Op == nightsim.OpCancelJobs {
					require.Equal(t, "sync", n.Mode, "seed %d: RequeueLive is off", seed)
				}
			}
			seen[string(e.Kind)] = true
		}
		seen["mode:"+n.Mode] = true
		seen["vendor:"+n.Vendor] = true
		if n.Fallback != "" {
			seen["fallback"] = true
		}
		if n.Child >= 0 {
			seen["child"] = true
		}
		if n.NoTopUp {
			seen["no top-up"] = true
		}
	}
	for _, want := range []string{"outage_on", "rate_on", "balance_low", "top_up", "flaky_on", "fallback_down", "stop", "kill", "start",
		"db_blip", "operate", "mode:sync", "mode:batch", "mode:auto", "vendor:openai", "vendor:anthropic", "fallback", "child", "no top-up"} {
		require.True(t, seen[want], "no night of 2000 draws %s", want)
	}
}
