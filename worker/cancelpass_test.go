package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
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

// One of two workers killed (SIGKILL) while the background responses of
// both are running at the provider, their ids stored, replay off: the
// survivor rescues the dead one's jobs and polls the stored ids instead of
// creating the responses again, under either policy (polling is no
// resend). Every record completes, each response created and billed once,
// the ledger equal to the provider's bill. The kill here lands in the
// polling, after every create answered: a kill inside a create, before the
// id is stored, loses the create's answer like any lost call, and the
// key's ambiguous policy decides (TestResponsesBackgroundLostCreate).
func TestKilledWorkerBackgroundPollsNotCreates(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"retry", "dead_letter"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			// The responses run until the test moves the fake's clock
			// past their generation, after the kill.
			const gen = time.Hour
			var skew atomic.Int64
			sc := fakeprovider.Scenario{NoReplay: true, GenerationTime: fakeprovider.Duration(gen),
				Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }}
			b := setup(t, sc, tweaks{timeout: "3s", concurrency: 4,
				extraKey: responsesKey + "background = true\nambiguous = \"" + policy + "\"\n"})
			// Two workers of 4 each: every record's response created at
			// once, some by each.
			const n = 8
			b.enqueue(t, "b1", records(n, nil))

			cmd := b.startProcess(t)
			b.opts.RescueAfter = 3 * time.Second
			b.opts.JobMargin = time.Second
			b.start(t)

			eventually(t, 60*time.Second, "every record's response created, its id stored, and polled", func() bool {
				var stored int
				require.NoError(t, b.db.Pool.QueryRow(context.Background(),
					`SELECT count(DISTINCT record_id) FROM triage_attempt WHERE response_id IS NOT NULL`).Scan(&stored))
				st := b.fake.Stats()
				return stored == n && st.BackgroundCreated == n && st.BackgroundPolls >= n
			})
			require.NoError(t, cmd.Process.Kill())
			_ = cmd.Wait()
			require.Zero(t, b.fake.Stats().BilledCalls, "killed while every response ran")
			skew.Store(int64(2 * gen))

			st := b.waitSettled(t, "b1", 90*time.Second)
			require.Equal(t, n, st.Completed, "every record completed")
			stats := b.fake.Stats()
			require.Equal(t, n, stats.BackgroundCreated, "no response created twice: the stored ids were polled")
			require.Equal(t, n, stats.BilledCalls)
			require.Zero(t, stats.DoubleBilledRecords, "nothing billed twice")
			require.Zero(t, st.PossiblyBilledUSD, "nothing left possibly billed")
			require.InDelta(t, stats.BilledUSD, st.SpendUSD, 1e-9, "the ledger equals the provider's bill")
			require.Positive(t, lostAnswers(t, b)["found"], "the dead worker's responses were found by their ids")
			amb, err := ledger.AmbiguityByKey(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
			require.NoError(t, err)
			require.Len(t, amb, 1)
			require.Zero(t, amb[0].PossiblyDoubleBilled)
		})
	}
}

// A background create whose answer is lost (it hangs after the provider
// made the response and billed it; a kill inside the create is the same:
// no id stored) is a lost call like any other, and the key's ambiguous
// policy decides, with replay off: dead_letter never bills twice, the
// record dead-lettered ambiguous_unresolved with its one attempt, possibly
// billed; retry creates the response again, billed twice and counted so.
func TestResponsesBackgroundLostCreate(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"retry", "dead_letter"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			sc := fakeprovider.Scenario{NoReplay: true, RecordScripts: map[string][]fakeprovider.Step{
				"r001": steps(act(fakeprovider.ActionHang)),
			}}
			b := setup(t, sc, tweaks{timeout: "2s", concurrency: 4,
				extraKey: responsesKey + "background = true\nambiguous = \"" + policy + "\"\n"})
			const n = 4
			b.enqueue(t, "b1", records(n, nil))
			b.start(t)
			st := b.waitSettled(t, "b1", 60*time.Second)
			stats := b.fake.Stats()
			amb, err := ledger.AmbiguityByKey(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
			require.NoError(t, err)
			require.Len(t, amb, 1)
			if policy == "dead_letter" {
				require.Equal(t, n-1, st.Completed)
				dls := b.deadLetters(t, "b1")
				require.Len(t, dls, 1)
				require.Equal(t, "r001", dls[0].RecordID)
				require.Equal(t, "ambiguous_unresolved", dls[0].Reason)
				require.Equal(t, 1, stats.ByRecord["r001"].Billed, "the lost create's response billed once, not created again")
				require.Zero(t, stats.DoubleBilledRecords, "nothing billed twice")
				require.Zero(t, amb[0].PossiblyDoubleBilled)
				require.Positive(t, st.PossiblyBilledUSD, "the lost create is in the ledger as possibly billed")
				return
			}
			require.Equal(t, n, st.Completed)
			require.Equal(t, 2, stats.ByRecord["r001"].Billed, "the lost create was created again")
			require.Equal(t, 1, stats.DoubleBilledRecords)
			require.Equal(t, stats.DoubleBilledRecords, amb[0].PossiblyDoubleBilled, "every double bill counted in the ledger")
		})
	}
}
