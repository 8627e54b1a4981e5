package keys

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func stormGates(t *testing.T, st StormSettings) (*testBundle, *Gate, *Gate) {
	t.Helper()
	b := setup(t)
	other, err := NewStore(secondPool(t, b.db), StoreConfig{Clock: b.clock, Owner: "test-2"})
	require.NoError(t, err)
	cfg := GateConfig{Key: "k", ProbeInterval: time.Minute, Storm: st}
	ga, err := b.store.NewGate(cfg)
	require.NoError(t, err)
	gb, err := other.NewGate(cfg)
	require.NoError(t, err)
	return b, ga, gb
}

// call admits one call on g and reports o; it fails the test if the call
// was not admitted.
func call(t *testing.T, g *Gate, o Outcome) Report {
	t.Helper()
	ctx := context.Background()
	adm, _, done, err := g.Admit(ctx, 0)
	require.NoError(t, err)
	require.True(t, adm.Allowed, "admitted: %+v", adm)
	rep, err := done(ctx, o, "")
	require.NoError(t, err)
	again, err := done(ctx, OutcomeFailure, "")
	require.NoError(t, err)
	require.Equal(t, Report{}, again, "done reports once")
	return rep
}

// A run of transient failures in one process trips the storm breaker for
// the whole fleet; outcomes that say nothing do not break the run's count
// and do not trip it.
func TestGateStormTripsFleetWide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, a, other := stormGates(t, StormSettings{Failures: 3, Share: -1})

	call(t, a, OutcomeFailure)
	call(t, a, OutcomeExcluded) // a throttle: neither success nor failure
	call(t, a, OutcomeFailure)
	rep := call(t, a, OutcomeFailure)
	require.True(t, rep.Storm.Opened, "three failures in a row trip it")
	require.True(t, rep.Storm.Open)
	require.Equal(t, StormProbeMinDefault, rep.Storm.Wait)
	require.True(t, rep.Changed)

	adm, _, _, err := other.Admit(ctx, 0)
	require.NoError(t, err)
	require.False(t, adm.Allowed, "the other process is refused: the decision is the fleet's")
	require.Equal(t, BreakerStorm, adm.Breaker)
	st, err := other.store.KeyStatus(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, StateOpen, st.Storm.State)
	require.Equal(t, StateClosed, st.State, "the exhausted breaker is another one")
	require.True(t, st.Paused())
}

// A success resets the run; a failure share over the window trips it.
func TestGateStormShare(t *testing.T) {
	t.Parallel()
	_, a, _ := stormGates(t, StormSettings{Failures: 3, Share: 0.5, MinCalls: 6, Window: time.Minute})
	for range 2 {
		require.False(t, call(t, a, OutcomeFailure).Storm.Opened)
		require.False(t, call(t, a, OutcomeFailure).Storm.Opened)
		call(t, a, OutcomeSuccess)
	}
	// 4 failures of 6 calls: over half.
	require.True(t, call(t, a, OutcomeFailure).Storm.Opened, "the share trips it although no run of three came")
}

// Failed probes double the cooldown up to ProbeMax; a successful probe
// closes the breaker, and every process admits calls again at once.
func TestGateStormProbes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, a, other := stormGates(t, StormSettings{Failures: 1, ProbeMin: 2 * time.Second, ProbeMax: 5 * time.Second})
	require.True(t, call(t, a, OutcomeFailure).Storm.Opened)

	probe := func(o Outcome) Report {
		t.Helper()
		adm, _, _, err := other.Admit(ctx, 0)
		require.NoError(t, err)
		require.False(t, adm.Allowed, "not before the cooldown")
		require.Positive(t, adm.Wait)
		b.clock.Advance(adm.Wait)
		adm, _, done, err := other.Admit(ctx, 0)
		require.NoError(t, err)
		require.True(t, adm.Allowed)
		require.True(t, adm.Probe, "the first call after the cooldown is the probe")
		refused, _, _, err := a.Admit(ctx, 0)
		require.NoError(t, err)
		require.False(t, refused.Allowed, "one probe at a time, fleet-wide")
		rep, err := done(ctx, o, "")
		require.NoError(t, err)
		return rep
	}
	require.Equal(t, 4*time.Second, probe(OutcomeFailure).Storm.Wait, "doubled")
	require.Equal(t, 5*time.Second, probe(OutcomeFailure).Storm.Wait, "capped at ProbeMax")
	require.Equal(t, 5*time.Second, probe(OutcomeFailure).Storm.Wait)
	st, err := a.store.KeyStatus(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, 5.0, st.Storm.CooldownS)

	// A probe that ends without a call gives the claim back at once.
	b.clock.Advance(5 * time.Second)
	adm, _, done, err := other.Admit(ctx, 0)
	require.NoError(t, err)
	require.True(t, adm.Probe)
	_, err = done(ctx, OutcomeNone, "")
	require.NoError(t, err)
	refused, _, _, err := a.Admit(ctx, 0)
	require.NoError(t, err)
	require.False(t, refused.Allowed)
	require.Equal(t, time.Second, refused.Wait, "the next probe may go a second later")

	rep := probe(OutcomeSuccess)
	require.True(t, rep.Storm.Closed)
	for _, g := range []*Gate{a, other} {
		adm, _, done, err := g.Admit(ctx, 0)
		require.NoError(t, err)
		require.True(t, adm.Allowed, "every process calls again: its own breaker starts afresh")
		require.False(t, adm.Probe)
		_, _ = done(ctx, OutcomeSuccess, "")
	}
}

// An exhausted answer to a storm probe ends the storm (the provider
// answers) and trips the exhausted breaker, which wins.
func TestGateStormProbeFindsKeyExhausted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, a, _ := stormGates(t, StormSettings{Failures: 1})
	require.True(t, call(t, a, OutcomeFailure).Storm.Opened)
	b.clock.Advance(StormProbeMinDefault)
	adm, _, done, err := a.Admit(ctx, 0)
	require.NoError(t, err)
	require.True(t, adm.Probe)
	rep, err := done(ctx, OutcomeExhausted, "insufficient_quota")
	require.NoError(t, err)
	require.True(t, rep.Storm.Closed)
	require.True(t, rep.Tripped)
	st, err := a.store.KeyStatus(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, StateOpen, st.State)
	require.Equal(t, "insufficient_quota", st.Reason, "the verdict's reason names why")
	require.Equal(t, StateClosed, st.Storm.State)
}

// A rejected request proves the provider up but says nothing about the
// balance: as the exhausted breaker's probe it gives the claim back and the
// breaker stays open; as the storm breaker's probe it closes the storm.
func TestGateRejectedProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, a, _ := stormGates(t, StormSettings{Failures: 1})
	adm, err := a.store.Admit(ctx, "k", 0)
	require.NoError(t, err)
	_, err = a.store.Trip(ctx, "k", adm, "insufficient_quota", time.Minute)
	require.NoError(t, err)
	b.clock.Advance(time.Minute)
	probe, _, done, err := a.Admit(ctx, 0)
	require.NoError(t, err)
	require.True(t, probe.Probe)
	require.Equal(t, BreakerExhausted, probe.Breaker)
	rep, err := done(ctx, OutcomeRejected, "context_length")
	require.NoError(t, err)
	require.False(t, rep.Resumed)
	st, err := a.store.KeyStatus(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, StateOpen, st.State, "still exhausted as far as anyone knows")

	require.NoError(t, a.store.Reset(ctx, "k"))
	require.True(t, call(t, a, OutcomeFailure).Storm.Opened)
	b.clock.Advance(StormProbeMinDefault)
	probe, _, done, err = a.Admit(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, BreakerStorm, probe.Breaker)
	rep, err = done(ctx, OutcomeRejected, "context_length")
	require.NoError(t, err)
	require.True(t, rep.Storm.Closed, "the provider answers: the storm is over")
}
