package keys

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const probeInterval = time.Minute

func TestBreakerTransitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	s := b.store

	adm, err := s.Admit(ctx, "a", 1)
	require.NoError(t, err)
	require.Equal(t, Admission{Allowed: true, State: StateClosed}, adm)

	tripped, err := s.Trip(ctx, "a", adm, "insufficient_quota", probeInterval)
	require.NoError(t, err)
	require.True(t, tripped)

	// Same generation again (another call that was in flight): no change.
	tripped, err = s.Trip(ctx, "a", adm, "insufficient_quota", probeInterval)
	require.NoError(t, err)
	require.False(t, tripped)

	st, err := s.KeyStatus(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, StateOpen, st.State)
	require.Equal(t, int64(1), st.Generation)
	require.Equal(t, "insufficient_quota", st.Reason)
	require.Equal(t, b.clock.Now(), st.OpenedAt.UTC())
	require.Equal(t, b.clock.Now().Add(probeInterval), st.NextProbe.UTC())
	require.True(t, st.Paused())

	b.clock.Advance(20 * time.Second)
	adm, err = s.Admit(ctx, "a", 2)
	require.NoError(t, err)
	require.False(t, adm.Allowed)
	require.Equal(t, 40*time.Second, adm.Wait)

	b.clock.Advance(40 * time.Second)
	probe, err := s.Admit(ctx, "a", 3)
	require.NoError(t, err)
	require.True(t, probe.Allowed)
	require.True(t, probe.Probe)
	require.NotEmpty(t, probe.Token)
	require.Equal(t, int64(1), probe.Generation)

	adm, err = s.Admit(ctx, "a", 4)
	require.NoError(t, err)
	require.False(t, adm.Allowed)
	require.Equal(t, StateHalfOpen, adm.State)
	require.Equal(t, ProbeLeaseDefault, adm.Wait)

	// The probe fails: open again, new generation, new probe time.
	applied, err := s.ProbeResult(ctx, "a", probe, false, probeInterval)
	require.NoError(t, err)
	require.True(t, applied)
	st, err = s.KeyStatus(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, StateOpen, st.State)
	require.Equal(t, int64(2), st.Generation)
	require.Equal(t, b.clock.Now().Add(probeInterval), st.NextProbe.UTC())

	// Reporting it twice changes nothing.
	applied, err = s.ProbeResult(ctx, "a", probe, true, probeInterval)
	require.NoError(t, err)
	require.False(t, applied)

	b.clock.Advance(probeInterval)
	probe, err = s.Admit(ctx, "a", 5)
	require.NoError(t, err)
	require.True(t, probe.Probe)
	applied, err = s.ProbeResult(ctx, "a", probe, true, probeInterval)
	require.NoError(t, err)
	require.True(t, applied)

	adm, err = s.Admit(ctx, "a", 6)
	require.NoError(t, err)
	require.True(t, adm.Allowed)
	require.False(t, adm.Probe)
	require.Equal(t, int64(3), adm.Generation)

	// A late exhausted from a call admitted in generation 0 is stale.
	tripped, err = s.Trip(ctx, "a", Admission{Allowed: true, Generation: 0}, "late", probeInterval)
	require.NoError(t, err)
	require.False(t, tripped)
	st, err = s.KeyStatus(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, StateClosed, st.State)
	require.False(t, st.Paused())
}

func TestBreakerTripWithProbeAdmissionReopens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	s := b.store

	_, err := s.Trip(ctx, "a", Admission{}, "billing", probeInterval)
	require.NoError(t, err)
	b.clock.Advance(probeInterval)
	probe, err := s.Admit(ctx, "a", 0)
	require.NoError(t, err)
	require.True(t, probe.Probe)

	tripped, err := s.Trip(ctx, "a", probe, "billing", probeInterval)
	require.NoError(t, err)
	require.False(t, tripped, "a failed probe is not a new trip")
	st, err := s.KeyStatus(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, StateOpen, st.State)
	require.Equal(t, int64(2), st.Generation)
}

func TestBreakerExactlyOneProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	// A second process: its own pool, same clock.
	other, err := NewStore(secondPool(t, b.db), StoreConfig{Clock: b.clock, Owner: "test-2"})
	require.NoError(t, err)

	_, err = b.store.Trip(ctx, "a", Admission{}, "credits", probeInterval)
	require.NoError(t, err)
	b.clock.Advance(probeInterval)

	const perStore = 25
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		probes []Admission
		denied int
	)
	start := make(chan struct{})
	for i := range 2 * perStore {
		store := b.store
		if i%2 == 1 {
			store = other
		}
		wg.Go(func() {
			<-start
			adm, err := store.Admit(ctx, "a", int64(i+1))
			require.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			if adm.Probe {
				probes = append(probes, adm)
			} else {
				require.False(t, adm.Allowed)
				denied++
			}
		})
	}
	close(start)
	wg.Wait()
	require.Len(t, probes, 1)
	require.Equal(t, 2*perStore-1, denied)

	st, err := other.KeyStatus(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, StateHalfOpen, st.State)
}

func TestBreakerExpiredProbeLeaseIsReclaimable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)

	// A worker of another process claims the probe and crashes.
	crashedPool := secondPool(t, b.db)
	crashed, err := NewStore(crashedPool, StoreConfig{Clock: b.clock, ProbeLease: 2 * time.Minute})
	require.NoError(t, err)
	_, err = crashed.Trip(ctx, "a", Admission{}, "credits", probeInterval)
	require.NoError(t, err)
	b.clock.Advance(probeInterval)
	lost, err := crashed.Admit(ctx, "a", 7)
	require.NoError(t, err)
	require.True(t, lost.Probe)
	crashedPool.Close()

	s, err := NewStore(b.db.Pool, StoreConfig{Clock: b.clock, ProbeLease: 2 * time.Minute})
	require.NoError(t, err)
	b.clock.Advance(2*time.Minute - time.Second)
	adm, err := s.Admit(ctx, "a", 8)
	require.NoError(t, err)
	require.False(t, adm.Allowed, "lease still live")
	require.Equal(t, time.Second, adm.Wait)

	b.clock.Advance(time.Second)
	probe, err := s.Admit(ctx, "a", 8)
	require.NoError(t, err)
	require.True(t, probe.Probe)
	require.NotEqual(t, lost.Token, probe.Token)

	// The crashed worker's result, arriving late, is ignored.
	applied, err := s.ProbeResult(ctx, "a", lost, true, probeInterval)
	require.NoError(t, err)
	require.False(t, applied)

	applied, err = s.ProbeResult(ctx, "a", probe, true, probeInterval)
	require.NoError(t, err)
	require.True(t, applied)
	st, err := s.KeyStatus(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, StateClosed, st.State)
}

func TestBreakerStaleGenerationProbeResultIgnored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	s := b.store

	_, err := s.Trip(ctx, "a", Admission{}, "credits", probeInterval)
	require.NoError(t, err)
	b.clock.Advance(probeInterval)
	probe, err := s.Admit(ctx, "a", 1)
	require.NoError(t, err)
	require.True(t, probe.Probe)

	// A human resumes the key while the probe is out (generation 2)...
	require.NoError(t, s.Reset(ctx, "a"))
	// ...and it is exhausted again (generation 3).
	adm, err := s.Admit(ctx, "a", 2)
	require.NoError(t, err)
	tripped, err := s.Trip(ctx, "a", adm, "credits", probeInterval)
	require.NoError(t, err)
	require.True(t, tripped)

	// The old probe's success must not close the new generation's breaker.
	applied, err := s.ProbeResult(ctx, "a", probe, true, probeInterval)
	require.NoError(t, err)
	require.False(t, applied)
	released, err := s.ReleaseProbe(ctx, "a", probe, 0)
	require.NoError(t, err)
	require.False(t, released)

	st, err := s.KeyStatus(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, StateOpen, st.State)
	require.Equal(t, int64(3), st.Generation)
}

func TestBreakerReleaseProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	s := b.store

	_, err := s.Trip(ctx, "a", Admission{}, "credits", probeInterval)
	require.NoError(t, err)
	b.clock.Advance(probeInterval)
	probe, err := s.Admit(ctx, "a", 1)
	require.NoError(t, err)

	released, err := s.ReleaseProbe(ctx, "a", probe, 5*time.Second)
	require.NoError(t, err)
	require.True(t, released)
	st, err := s.KeyStatus(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, StateOpen, st.State)
	require.Equal(t, int64(1), st.Generation, "no verdict, same generation")
	require.Equal(t, b.clock.Now().Add(5*time.Second), st.NextProbe.UTC())
}

func TestResetEndsPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	s := b.store

	_, err := s.Pause(ctx, "a", PauseThrottled, b.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	_, err = s.Trip(ctx, "a", Admission{}, "credits", probeInterval)
	require.NoError(t, err)

	require.NoError(t, s.Reset(ctx, "a"))
	st, err := s.KeyStatus(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, StateClosed, st.State)
	require.Nil(t, st.Pause)
	require.False(t, st.Paused())
}

func TestAdmitEmptyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.store.Admit(context.Background(), "", 0)
	require.ErrorIs(t, err, ErrInvalidKey)
}
