package service

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Loop runs its first pass at once and goes on until Stop, which waits
// for the pass under way; a Loop never started stops at once.
func TestLoop(t *testing.T) {
	t.Parallel()
	var idle Loop
	idle.Stop()

	var l Loop
	passes := make(chan int)
	n := 0
	l.Start(context.Background(), time.Millisecond, 1, 1, func(ctx context.Context) {
		n++
		select {
		case passes <- n:
		case <-ctx.Done():
		}
	})
	require.Equal(t, 1, <-passes)
	require.Equal(t, 2, <-passes)
	l.Stop()
	require.GreaterOrEqual(t, n, 2, "read after Stop: no pass runs any more")
}

func TestRequired(t *testing.T) {
	t.Parallel()
	require.NoError(t, Required("pkg", Field{Name: "Pool"}, Field{Name: "Config"}))
	require.EqualError(t, Required("pkg", Field{Name: "Pool"}, Field{Name: "Config", Missing: true}, Field{Name: "Plan", Missing: true}),
		"pkg: Config.Config is required")
}

// Signal never blocks: a nil channel or a full one drops the value.
func TestSignal(t *testing.T) {
	t.Parallel()
	Signal[int](nil, 1)
	ch := make(chan int, 1)
	Signal(ch, 1)
	Signal(ch, 2)
	require.Equal(t, 1, <-ch)
	require.Empty(t, ch)
}
