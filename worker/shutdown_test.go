package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// Fault 2: a stop lets the calls in flight finish and stores their answers.
// The model takes a while and bills even if the client gives up, and the
// provider does not replay: a cut call would be billed again on its resend.
// StopGrace covers the longest key timeout (the CLI's stop used a fixed
// 15 s, shorter than the default 60 s timeout).
func TestStopLetsCallsInFlightFinish(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true, GenerationTime: fakeprovider.Duration(time.Second)},
		tweaks{concurrency: 4, timeout: "20s"})
	b.enqueue(t, "b1", records(4, nil))
	rt := b.newRuntime(t)
	require.GreaterOrEqual(t, rt.StopGrace(), 20*time.Second, "the grace covers the key's timeout")
	// The four calls are held at the model until all four are in flight
	// (on a loaded machine they may start more than a generation apart);
	// released, each still generates for a second, during which the stop
	// comes.
	release := b.fake.HoldGenerations()
	defer release()
	require.NoError(t, rt.Start(context.Background()))
	inFlight, cancelWait := context.WithTimeout(context.Background(), time.Minute)
	defer cancelWait()
	require.NoError(t, b.fake.WaitFor(inFlight, func(st fakeprovider.Stats) bool { return st.InFlight == 4 }), "four calls in flight")
	release()

	ctx, cancel := context.WithTimeout(context.Background(), rt.StopGrace())
	defer cancel()
	require.NoError(t, rt.Stop(ctx))
	st := b.status(t, "b1")
	require.Equal(t, 4, st.Completed, "the answers that arrived during the stop are stored")
	stats := b.fake.Stats()
	require.Zero(t, stats.BilledAfterClientLeft, "no paid call was cut")
	require.Equal(t, 4, stats.BilledCalls)
	require.Zero(t, st.PossiblyBilledUSD)
}
