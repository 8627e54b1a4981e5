package keys

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPauseExtendsNeverShortens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	s := b.store
	now := b.clock.Now()

	p, err := s.Pause(ctx, "a", PauseThrottled, now.Add(20*time.Second))
	require.NoError(t, err)
	require.Equal(t, now.Add(20*time.Second), p.Until.UTC())
	require.Equal(t, "test-1", p.SetBy)

	// Shorter: kept as it was.
	p, err = s.Pause(ctx, "a", PauseExhausted, now.Add(5*time.Second))
	require.NoError(t, err)
	require.Equal(t, now.Add(20*time.Second), p.Until.UTC())
	require.Equal(t, PauseThrottled, p.Reason)

	// Longer: extended, with the new reason.
	p, err = s.Pause(ctx, "a", PauseExhausted, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, now.Add(time.Minute), p.Until.UTC())
	require.Equal(t, PauseExhausted, p.Reason)
	require.Equal(t, now, p.CreatedAt.UTC())

	active, err := s.ActivePause(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, p, active)

	none, err := s.ActivePause(ctx, "b")
	require.NoError(t, err)
	require.Nil(t, none)

	_, err = s.Pause(ctx, "b", PauseThrottled, now.Add(time.Second))
	require.NoError(t, err)
	list, err := s.ListPauses(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "a", list[0].Key)
	require.Equal(t, "b", list[1].Key)

	b.clock.Advance(time.Second)
	list, err = s.ListPauses(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	none, err = s.ActivePause(ctx, "b")
	require.NoError(t, err)
	require.Nil(t, none)

	// After a pause ended, a new one starts afresh.
	p, err = s.Pause(ctx, "b", PauseExhausted, b.clock.Now().Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, b.clock.Now(), p.CreatedAt.UTC())
	require.Equal(t, PauseExhausted, p.Reason)
}

func TestKeyStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	s := b.store

	st, err := s.KeyStatus(ctx, "never")
	require.NoError(t, err)
	require.Equal(t, &KeyStatus{Key: "never", State: StateClosed, Storm: StormStatus{State: StateClosed}, Now: st.Now}, st)
	require.Equal(t, b.clock.Now(), st.Now.UTC())

	_, err = s.Trip(ctx, "x", Admission{}, "credits", probeInterval)
	require.NoError(t, err)
	_, err = s.Pause(ctx, "y", PauseThrottled, b.clock.Now().Add(time.Minute))
	require.NoError(t, err)

	list, err := s.ListKeyStatus(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "x", list[0].Key)
	require.Equal(t, StateOpen, list[0].State)
	require.Nil(t, list[0].Pause)
	require.Equal(t, "y", list[1].Key)
	require.Equal(t, StateClosed, list[1].State)
	require.NotNil(t, list[1].Pause)
	require.Equal(t, PauseThrottled, list[1].Pause.Reason)
	require.True(t, list[1].Paused())
}
