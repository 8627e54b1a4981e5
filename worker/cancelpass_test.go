package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/operator"
)

// A batch cancelled by hand while its jobs are queued (a run stopped while
// polling their background responses put them back) has its records
// dead-lettered at once, with no run of theirs left to cancel the
// responses still running at the provider. A worker's pass finds them by
// the ids stored on the attempts and cancels them: never billed. A
// response that ended before the pass reached it was billed: the pass
// fetches it and records that cost once. Either way the ledger ends equal
// to the provider's bill, with nothing left possibly billed.
func TestResponsesLeftRunningCancelledAfterBatchCancel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// ended: the responses' generation is over (on the fake's
		// clock) before the pass runs, so they were billed.
		ended bool
	}{
		{name: "running"},
		{name: "ended_before_the_pass", ended: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const gen = time.Minute
			var skew atomic.Int64 // the fake's clock, ahead of the wall clock
			sc := fakeprovider.Scenario{NoReplay: true, GenerationTime: fakeprovider.Duration(gen),
				Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }}
			b := setup(t, sc, tweaks{timeout: "5m", concurrency: 4, extraKey: responsesKey + "background = true\n"})
			const n = 4
			b.enqueue(t, "b1", records(n, nil))
			rt := b.newRuntime(t)
			require.NoError(t, rt.Start(context.Background()))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			require.NoError(t, b.fake.WaitFor(ctx, func(st fakeprovider.Stats) bool {
				return st.BackgroundCreated == n && st.BackgroundPolls >= n
			}), "every response created and polled while it runs")
			stop, cancelStop := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_ = rt.Stop(stop)
			cancelStop()
			require.Zero(t, b.fake.Stats().BilledCalls, "stopped before any response ended")
			require.Equal(t, map[string]int{"possibly_billed": n}, b.countBy(t,
				`SELECT status, count(*) FROM triage_attempt WHERE response_id IS NOT NULL GROUP BY 1`),
				"each running response's id is on its attempt")
			require.Zero(t, b.countBy(t, `SELECT 'running', count(*) FROM river_job WHERE state = 'running'`)["running"],
				"the jobs went back to the queue")

			res, err := operator.CancelBatch(context.Background(), b.db.Pool, "b1", operator.ControlOptions{Schema: b.db.Schema})
			require.NoError(t, err)
			require.Equal(t, n, res.DeadLettered, "the queued records dead-lettered at once, with no run")
			if tc.ended {
				skew.Store(int64(2 * gen))
			}

			b.start(t)
			eventually(t, 30*time.Second, "every left response settled in the ledger", func() bool {
				return b.countBy(t, `SELECT 'left', count(*) FROM triage_attempt
					WHERE response_id IS NOT NULL AND status IN ('intent', 'possibly_billed')`)["left"] == 0
			})
			st := b.status(t, "b1")
			require.Equal(t, n, st.DeadLettered)
			require.Zero(t, st.Completed)
			stats := b.fake.Stats()
			require.Equal(t, n, stats.BackgroundCreated, "no response created again")
			require.Zero(t, stats.DoubleBilledRecords, "nothing billed twice")
			require.Zero(t, st.PossiblyBilledUSD, "nothing left possibly billed")
			if tc.ended {
				require.Equal(t, n, stats.BilledCalls, "the responses ended before the pass: billed once each")
				require.Positive(t, st.SpendUSD)
				require.Equal(t, map[string]int{"response_ended_unwanted": n}, b.countBy(t,
					`SELECT reason, count(*) FROM triage_attempt WHERE response_id IS NOT NULL GROUP BY 1`))
			} else {
				require.Equal(t, n, stats.BackgroundCancels, "each running response cancelled at the provider")
				require.Zero(t, stats.BilledCalls, "a cancelled response is not billed")
				require.Equal(t, map[string]int{"response_cancelled": n}, b.countBy(t,
					`SELECT reason, count(*) FROM triage_attempt WHERE response_id IS NOT NULL GROUP BY 1`))
			}
			require.InDelta(t, stats.BilledUSD, st.SpendUSD, 1e-9, "the ledger equals the provider's bill")
		})
	}
}
