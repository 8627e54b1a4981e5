package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/workertest"
)

// Account errors no rule knows, worded in ways the classifier cannot read:
// no money, balance or quota word, codes of their own.
var (
	unseenRequestError = &fakeprovider.Step{Status: 400, Body: json.RawMessage(
		`{"error":{"message":"The request was declined: context handle zq-1185 is not in a usable state (ref 7f3a9c2e)","type":"invalid_request_error","param":null,"code":"handle_state_invalid"}}`)}
	unseenRateLimit = &fakeprovider.Step{Status: 429, Body: json.RawMessage(
		`{"error":{"message":"Declined by upstream gate ug-4471 for handle zq-1185","type":"requests","param":null,"code":"gate_declined"}}`)}
)

// The end-to-end check: 200 records, 16 workers, replay off; after
// about 15 records the balance runs out and every call is answered with an
// account error no rule knows. The safety net holds the key: at most one
// wave of calls in flight is dead-lettered, the dead account sees at most
// twice the key's concurrency plus one request per probe interval, an alert
// fires, and after a top-up the batch completes with nothing billed twice
// and no manual requeue.
func TestSafetyNetHoldsUnseenAccountError(t *testing.T) {
	t.Parallel()
	one := oneCallCost(t, "")
	for _, tc := range []struct {
		name   string
		answer *fakeprovider.Step
		alert  string
	}{
		{"request_error", unseenRequestError, "key_suspect"},
		{"rate_limit", unseenRateLimit, "key_suspect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const n, concurrency, probe = 200, 16, 300 * time.Millisecond
			sc := fakeprovider.Scenario{NoReplay: true, Balance: &fakeprovider.Balance{USD: 15 * one * 0.999, Answer: tc.answer}}
			// throttle_hold_after 1s (default 2s): how many requests reach
			// the dead account before the hold depends on how fast the
			// pacer lets them go in that window; on a loaded machine 2s
			// let 40–43 through, past the bound below.
			b := setup(t, sc, tweaks{concurrency: concurrency, probeInterval: probe.String(), extraKey: `throttle_hold_after = "1s"` + "\n"})
			b.opts.SpendCheck = 50 * time.Millisecond
			b.opts.RequeueDeadLetters = workertest.Requeue(b.cfg, b.db.Pool)
			b.enqueue(t, "b1", records(n, nil))
			b.start(t)
			t.Cleanup(func() {
				st := b.fake.Stats()
				t.Logf("%s: %d requests reached the dead account, %d requests in all", tc.name, st.RequestsWhileExhausted, st.Requests)
			})

			// Held, or (before the safety net) the batch ran out on its own.
			workertest.Eventually(t, 60*time.Second, "the key is held or the batch settles", func() bool {
				st := b.status(t, "b1")
				return b.hooks.count(tc.alert) > 0 || st.Completed+st.DeadLettered == st.Total
			})
			st := b.status(t, "b1")
			held := b.fake.Stats()
			t.Logf("%s: held=%v after %d requests to the dead account; %d dead-lettered, %d completed",
				tc.name, b.hooks.count(tc.alert) > 0, held.RequestsWhileExhausted, deadLettered(t, b), st.Completed)
			require.Equal(t, 1, b.hooks.count(tc.alert), "one alert names the suspected account problem: %s", b.hooks.all())
			require.Contains(t, b.hooks.all(), "fingerprint")

			// Several probe intervals pass while the account stays dead.
			const intervals = 5
			deadline := time.Now().Add(intervals * probe)
			workertest.Eventually(t, 10*time.Second, "probe intervals pass", func() bool { return time.Now().After(deadline) })
			mid := b.fake.Stats()
			require.LessOrEqual(t, mid.RequestsWhileExhausted, 2*concurrency+intervals+1,
				"the dead account is not hammered: %d requests while it was dead (%d when held)",
				mid.RequestsWhileExhausted, held.RequestsWhileExhausted)
			dead := deadLettered(t, b)
			require.LessOrEqual(t, dead, concurrency, "at most one wave of calls in flight is dead-lettered")
			states := b.jobStates(t)
			require.Zero(t, states["discarded"], "%v", states)
			require.LessOrEqual(t, states["cancelled"], concurrency, "only the dead-lettered jobs ended: %v", states)

			b.fake.TopUp(1)
			// After a wall of 429s the pacer has cut the key's pace, and
			// it speeds up again only gradually: allow it minutes.
			workertest.Eventually(t, 3*time.Minute, "every record completes after the top-up", func() bool {
				return b.status(t, "b1").Completed == n
			})
			require.Zero(t, b.fake.Stats().DoubleBilledRecords, "nothing is billed twice")
			for _, dl := range b.deadLetters(t, "b1") {
				t.Errorf("dead letter left after the top-up: %s %s", dl.RecordID, dl.Reason)
			}
			var requeued int
			require.NoError(t, b.db.Pool.QueryRow(context.Background(),
				`SELECT count(*) FROM triage_dead_letter WHERE batch = 'b1' AND requeued_at IS NOT NULL`).Scan(&requeued))
			require.Equal(t, deadLettered(t, b), requeued, "the suspect dead letters went back to the queue by themselves")
			var marked int
			require.NoError(t, b.db.Pool.QueryRow(context.Background(),
				`SELECT count(*) FROM triage_dead_letter WHERE batch = 'b1' AND suspect <> ''`).Scan(&marked))
			require.Equal(t, requeued, marked, "each dead letter of the held failure is marked suspect")
			workertest.Eventually(t, 10*time.Second, "the key_resumed alert", func() bool { return b.hooks.count("key_resumed") >= 1 })
		})
	}
}

// A poisoned batch: 30 % of the records are too long for the model, good
// records between them. Each is dead-lettered as it is rejected; the
// rejection streak never holds the healthy key.
func TestSafetyNetLetsPoisonedBatchThrough(t *testing.T) {
	t.Parallel()
	const n, concurrency = 200, 16
	sc := fakeprovider.Scenario{NoReplay: true, Poison: fakeprovider.Poison{ContextTokens: 2000}}
	b := setup(t, sc, tweaks{concurrency: concurrency})
	b.opts.SpendCheck = 50 * time.Millisecond
	b.opts.RequeueDeadLetters = workertest.Requeue(b.cfg, b.db.Pool)
	poisoned := func(i int) bool { return i%10 == 1 || i%10 == 4 || i%10 == 7 }
	b.enqueue(t, "b1", records(n, func(i int) string {
		if poisoned(i) {
			return `,"note":"` + strings.Repeat("far too long for the model ", 1500) + `"`
		}
		return ""
	}))
	b.start(t)
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, 60, st.DeadLettered, "every poisoned record is dead-lettered")
	require.Equal(t, n-60, st.Completed)
	for _, dl := range b.deadLetters(t, "b1") {
		require.Equal(t, "rejected", dl.Class, "%s: %s", dl.RecordID, dl.Reason)
	}
	require.Zero(t, b.hooks.count("key_suspect"), "the healthy key is never held: %s", b.hooks.all())
	require.Zero(t, b.hooks.count("key_exhausted"))
	var requeued int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM triage_dead_letter WHERE requeued_at IS NOT NULL`).Scan(&requeued))
	require.Zero(t, requeued, fmt.Sprintf("no dead letter was taken back (%d)", requeued))
}

// deadLettered counts every dead letter of batch b1, requeued or not.
func deadLettered(t *testing.T, b *testBundle) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM triage_dead_letter WHERE batch = 'b1'`).Scan(&n))
	return n
}

// A false hold: the first records of a batch are all poisoned with one
// error, so the streak holds the healthy key. The probe finds it working,
// the key resumes, and the records taken back are rejected again: each
// has had its second chance, so they are dead-lettered for good and the
// key is not held again.
func TestSafetyNetSecondChanceDoesNotHoldAgain(t *testing.T) {
	t.Parallel()
	const n = 12
	sc := fakeprovider.Scenario{NoReplay: true, Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}
	b := setup(t, sc, tweaks{concurrency: 1, probeInterval: "200ms", extraKey: "suspect_rejections = 3\n"})
	b.opts.SpendCheck = 50 * time.Millisecond
	b.opts.RequeueDeadLetters = workertest.Requeue(b.cfg, b.db.Pool)
	b.enqueue(t, "b1", records(n, func(i int) string {
		if i < 3 {
			return `,"note":"POISON"`
		}
		return ""
	}))
	b.start(t)
	workertest.Eventually(t, 60*time.Second, "the good records complete and the poisoned ones end dead-lettered", func() bool {
		st := b.status(t, "b1")
		return st.Completed == n-3 && st.DeadLettered == 3
	})
	require.Equal(t, 1, b.hooks.count("key_suspect"), "held once, not again after the second chance: %s", b.hooks.all())
	for _, dl := range b.deadLetters(t, "b1") {
		require.Equal(t, "rejected", dl.Class, "%s: %s", dl.RecordID, dl.Reason)
	}
}

// The rejection streak is counted fleet-wide: two worker processes on one
// key, each rejected by half of an account error's storm, still hold the
// key (suspect_rejections = 6, three records each at most).
func TestSafetyNetStreakCountedFleetWide(t *testing.T) {
	t.Parallel()
	const n = 6
	scripts := map[string][]fakeprovider.Step{}
	for i := 1; i <= n; i++ {
		scripts[fmt.Sprintf("r%03d", i)] = []fakeprovider.Step{*unseenRequestError}
	}
	sc := fakeprovider.Scenario{NoReplay: true, RecordScripts: scripts, Latency: fakeprovider.Duration(100 * time.Millisecond)}
	b := setup(t, sc, tweaks{concurrency: 2, probeInterval: "200ms", extraKey: "suspect_rejections = 6\n"})
	b.opts.SpendCheck = 50 * time.Millisecond
	b.opts.RequeueDeadLetters = workertest.Requeue(b.cfg, b.db.Pool)
	b.enqueue(t, "b1", records(n, nil))
	one, two := b.newRuntime(t), b.newRuntime(t)
	b.run(t, one)
	b.run(t, two)
	workertest.Eventually(t, 60*time.Second, "the streak holds the key", func() bool {
		return b.hooks.count("key_suspect") > 0 || b.status(t, "b1").DeadLettered == n
	})
	require.Equal(t, 1, b.hooks.count("key_suspect"), "six records rejected in a row across two processes hold the key: %s", b.hooks.all())
	workertest.Eventually(t, 60*time.Second, "the records taken back complete once the key resumes", func() bool {
		return b.status(t, "b1").Completed == n
	})
	require.Zero(t, b.fake.Stats().DoubleBilledRecords)
}

// Batch mode: an error line in a Batch API result counts toward the same
// rejection streak as a synchronous call's error. Every line of a batch
// rejected with one error, no success between: the key is held as for
// synchronous calls.
func TestSafetyNetWatchesBatchLines(t *testing.T) {
	t.Parallel()
	b, _ := setupBatch(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, "batch",
		tweaks{concurrency: 4, probeInterval: "300ms", extraKey: "suspect_rejections = 5\n"})
	b.opts.RequeueDeadLetters = workertest.Requeue(b.cfg, b.db.Pool)
	const n = 12
	b.enqueue(t, "b1", records(n, poisoned(1)))
	b.start(t)
	workertest.Eventually(t, 60*time.Second, "the key is held or every line is dead-lettered", func() bool {
		return b.hooks.count("key_suspect") > 0 || b.status(t, "b1").DeadLettered == n
	})
	require.GreaterOrEqual(t, b.hooks.count("key_suspect"), 1, "five lines rejected in a row with one error hold the key: %s", b.hooks.all())
	require.Contains(t, b.hooks.all(), `"hold":"rejection_streak"`)
	// The probe finds the key working (the records are the problem): it
	// resumes, and every record ends dead-lettered once it has had its
	// second chance (a batch whose every record fails alike may be held
	// again by the records the first hold parked: each hold costs a probe
	// interval, none bills a record twice).
	workertest.Eventually(t, 90*time.Second, "every poisoned record ends dead-lettered", func() bool {
		return b.status(t, "b1").DeadLettered == n
	})
	require.Zero(t, b.fake.Stats().DoubleBilledRecords)
	for _, dl := range b.deadLetters(t, "b1") {
		require.Equal(t, "rejected", dl.Class, "%s: %s", dl.RecordID, dl.Reason)
	}
}

// Batch mode: the lines of one provider batch are answered together and
// applied by their jobs in no order, so ten poisoned lines applied before
// or after the batch's one good line are not "rejected in a row": the
// account served that batch, and the key is not held. (The 2,000-record
// batch-mode test failed about one run in four on a fresh cluster: "each
// record sent in one batch line, once: expected 2000, actual 2113", a
// key_suspect hold sending the poisoned records again.)
func TestSafetyNetLetsAProviderBatchWithASuccessThrough(t *testing.T) {
	t.Parallel()
	b, _ := setupBatch(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, "batch",
		tweaks{concurrency: 4, probeInterval: "300ms", extraKey: "suspect_rejections = 3\n"})
	const n = 11
	b.oneGather(n, time.Hour)
	b.enqueue(t, "b1", records(n, func(i int) string {
		if i == 6 {
			return ""
		}
		return `,"note":"POISON"`
	}))
	b.start(t)
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, 1, st.Completed)
	require.Equal(t, n-1, st.DeadLettered)
	require.Zero(t, b.hooks.count("key_suspect"), "one provider batch with a good line: %s", b.hooks.all())
	stats := b.fake.Stats()
	require.Equal(t, 1, stats.Batches.Created, "one provider batch")
	require.Equal(t, n, stats.Batches.Lines, "each record sent once")
}

// A success answered between two rejections ends the streak even when its
// report to the fleet's runs (its completion's write) lands after both, as
// it does on a busy worker when completions queue up: a poisoned batch
// whose good records' completions lag must not hold the healthy key.
// Here the success's completion is held until the rejections after it
// have been recorded.
func TestSafetyNetStreakEndedByASuccessReportedLate(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{NoReplay: true, Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}
	b := setup(t, sc, tweaks{concurrency: 4, probeInterval: "200ms", extraKey: "suspect_rejections = 3\n"})
	b.opts.SpendCheck = 50 * time.Millisecond
	rt := b.newRuntime(t)
	held, release := make(chan struct{}), make(chan struct{})
	var hold, free sync.Once
	unblock := func() { free.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	rt.SetGroupHooks(nil, func(int) { hold.Do(func() { close(held); <-release }) }, false)
	b.run(t, rt)
	poison := func(int) string { return `,"note":"POISON"` }
	deadIn := func(batch string) int { return b.status(t, batch).DeadLettered }

	b.enqueue(t, "b1", records(1, poison))
	workertest.Eventually(t, 30*time.Second, "the first rejection", func() bool { return deadIn("b1") == 1 })
	b.enqueue(t, "b2", records(1, nil))
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the success never reached its completion")
	}
	b.enqueue(t, "b3", records(2, poison))
	workertest.Eventually(t, 30*time.Second, "two more rejections, or a hold", func() bool {
		return deadIn("b3") == 2 || b.hooks.count("key_suspect") > 0
	})
	unblock()
	require.Equal(t, 1, b.waitSettled(t, "b2", 30*time.Second).Completed)
	require.Zero(t, b.hooks.count("key_suspect"), "a success came between the rejections: %s", b.hooks.all())
}
