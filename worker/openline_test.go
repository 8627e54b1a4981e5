package worker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/operator"
	"github.com/triage-dev/triage/worker/workertest"
)

// The open-line rule (ledger.LineHold): a record whose line is in a live
// provider batch, or holds a paid answer not applied yet, is neither moved
// to a fallback, resent synchronously, requeued, nor ended before its
// answer is collected. These tests pin it where the features meet
// (issue 19), with the fake's Idempotency-Key replay off.

// anthropicFallback is a fallback key on another vendor at baseURL.
func anthropicFallback(baseURL string) string {
	return fmt.Sprintf(`fallback = ["fb-model"]
fallback_grace = "100ms"

[[keys]]
name = "fb"
vendor = "anthropic"
base_url = %q
api_key_env = %q
concurrency = 4
timeout = "5s"
probe_interval = "500ms"

[[models]]
name = "fb-model"
key = "fb"
json_mode = true
input_usd_per_mtok = 0.30
output_usd_per_mtok = 1.20
`, baseURL, workertest.APIKeyEnv)
}

// openBreaker opens key's exhausted breaker as a tripped key would, opened
// a minute ago (past any fallback_grace), its next probe a day away.
func (b *testBundle) openBreaker(t *testing.T, key string) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), `INSERT INTO triage_key_state (key, state, generation, opened_at, probe_at, reason)
		VALUES ($1, 'open', 1, now() - interval '1 minute', now() + interval '1 day', 'billing_quota')
		ON CONFLICT (key) DO UPDATE SET state = 'open', generation = triage_key_state.generation + 1,
			opened_at = EXCLUDED.opened_at, probe_at = EXCLUDED.probe_at, reason = EXCLUDED.reason`, key)
	require.NoError(t, err)
}

// queueCount counts a batch's jobs by queue.
func (b *testBundle) queueCount(t testing.TB, batch string) map[string]int {
	t.Helper()
	return b.countBy(t, "SELECT queue, count(*) FROM river_job WHERE args->>'batch' = '"+batch+"' GROUP BY 1")
}

// Issue 19 (1): the primary's breaker opens while a provider batch holds
// every line of b1. The mover moves the records that have no line (b2) to
// the fallback on another vendor, and leaves b1's where they are: their
// answers come from the primary's batch, are decoded in its format and
// priced at its model once the key is back. Nothing is dead-lettered
// invalid_output, nothing is sent twice.
func TestFallbackMoverLeavesRecordsWithALiveLine(t *testing.T) {
	t.Parallel()
	const n, m = 5, 3
	fb, fbURL := workertest.Provider(t, fakeprovider.Scenario{APIKey: workertest.APIKey, NoReplay: true})
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)}}
	b, clock := setupBatch(t, sc, "batch", tweaks{extraPipeline: anthropicFallback(fbURL)})
	b.oneGather(n, 5*time.Second) // one provider batch, however slowly the jobs write their lines
	b.enqueue(t, "b1", records(n, nil))
	rt := b.start(t)
	eventually(t, 30*time.Second, "b1's provider batch is submitted", func() bool { return b.providerBatches(t)["submitted"] == 1 && b.lineStates(t)["submitted"] == n })
	eventually(t, 30*time.Second, "b1's jobs sleep", func() bool { return b.jobStates(t)["scheduled"] == n })

	b.openBreaker(t, workertest.Key)
	b.enqueue(t, "b2", records(m, nil))
	// b2 has no line: it moves, and completes on the fallback. The mover
	// has then looked at b1's jobs too (they come first).
	eventually(t, 30*time.Second, "b2 completes on the fallback", func() bool { return b.status(t, "b2").Completed == m })
	require.Equal(t, map[string]int{"key_" + workertest.Key: n}, b.queueCount(t, "b1"), "b1's jobs stay on the key that sent their lines")
	require.Zero(t, b.status(t, "b1").Fallback)

	clock.Advance(2 * time.Hour) // the primary's provider batch ends
	eventually(t, 30*time.Second, "b1's answers are collected", func() bool { return b.lineStates(t)["answered"] == n })
	require.NoError(t, rt.Store().Reset(context.Background(), workertest.Key)) // the key is back
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed, "no paid answer dead-lettered")
	require.Zero(t, st.DeadLettered)
	require.EqualValues(t, n, st.Models["fake-model"], "answered and priced as the primary's")
	require.Equal(t, n, b.fake.Stats().Batches.Succeeded)
	require.Equal(t, m, fb.Stats().Batches.Lines, "the fallback got b2's lines only")
	b.requireBilledOnceWith(t, fb)
}

// requireBilledOnceWith is requireBilledOnce with a second provider (the
// fallback's): nothing billed twice by either, and the primary key's
// ledger spend is the primary's bill.
func (b *testBundle) requireBilledOnceWith(t *testing.T, other *fakeprovider.Server) {
	t.Helper()
	for _, f := range []*fakeprovider.Server{b.fake, other} {
		stats := f.Stats()
		require.Zero(t, stats.DoubleBilledRecords, "nothing billed twice")
		for id, r := range stats.ByRecord {
			require.LessOrEqual(t, r.Billed, 1, "record %s billed %d times", id, r.Billed)
		}
	}
	var (
		costUSD float64
		open    int
	)
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(cost_usd), 0)::float8,
		count(*) FILTER (WHERE status IN ('intent', 'possibly_billed')) FROM triage_attempt WHERE key = $1`,
		workertest.Key).Scan(&costUSD, &open))
	require.InDelta(t, b.fake.Stats().BilledUSD, costUSD, 1e-9, "the primary key's ledger is its bill")
	require.Zero(t, open, "every attempt settled")
}

// deadLetterIDOf is the id of record's dead letter in batch (0: none).
func (b *testBundle) deadLetterIDOf(t testing.TB, batch, record string) int64 {
	t.Helper()
	var id int64
	err := b.db.Pool.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) FROM triage_dead_letter
		WHERE batch = $1 AND record_id = $2 AND requeued_at IS NULL`, batch, record).Scan(&id)
	require.NoError(t, err)
	return id
}

// Issue 19 (2): a job cancelled by hand while its line is in a live
// provider batch (what `triage batch cancel`'s help suggests) is
// dead-lettered cancelled_by_hand; `triage dlq requeue` of that record is
// refused while the provider still runs (and bills) the line, naming the
// provider batch, instead of sending the record in a second provider
// batch. Once the answer is collected (billed once, recorded), the
// requeue goes through (its new job applies that answer:
// TestRequeueAfterAHandCancelAppliesThePaidAnswer).
func TestRequeueRefusesARecordWhoseLineIsInALiveProviderBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 3
	b, clock, dl := cancelledInALiveBatch(t, n)

	var providerBatch string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT provider_batch_id FROM triage_provider_batch`).Scan(&providerBatch))
	for _, sel := range []operator.Selection{{IDs: []int64{dl}}, {Batch: "b1"}} {
		_, err := operator.Requeue(ctx, b.db.Pool, b.cfg, sel, operator.RequeueOptions{})
		var liveErr *operator.LiveJobError
		require.ErrorAs(t, err, &liveErr, "selection %+v", sel)
		require.Contains(t, err.Error(), providerBatch)
		require.Contains(t, err.Error(), "r002")
		got, err := ledger.GetDeadLetter(ctx, b.db.Pool, dl)
		require.NoError(t, err)
		require.Nil(t, got.RequeuedAt, "nothing marked")
	}
	require.Equal(t, n, b.countBy(t, "SELECT 'all', count(*) FROM river_job")["all"], "no job inserted")

	clock.Advance(2 * time.Hour)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n-1, st.Completed)
	eventually(t, 30*time.Second, "r002's answer is recorded, held for a requeue", func() bool {
		return b.lineStates(t)["applied"] == n-1 && b.lineStates(t)["answered"] == 1 && b.countBy(t,
			"SELECT 'open', count(*) FROM triage_attempt WHERE status = 'intent'")["open"] == 0
	})
	require.Equal(t, 1, b.fake.Stats().Batches.Created, "one provider batch: r002 was not sent again")
	b.requireBilledOnce(t)
	res, err := operator.Requeue(ctx, b.db.Pool, b.cfg, operator.Selection{IDs: []int64{dl}}, operator.RequeueOptions{})
	require.NoError(t, err, "the answer collected, the record may go again")
	require.Equal(t, 1, res.Requeued)
}

// wakeAll makes every sleeping job of batch run now, as the end of its
// BatchWait (or a deploy's restart) would.
func (b *testBundle) wakeAll(t testing.TB, batch, set string) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), `UPDATE river_job SET state = 'available', scheduled_at = now()`+set+`
		WHERE args->>'batch' = $1 AND state = 'scheduled'`, batch)
	require.NoError(t, err)
}

// stopRuntime stops rt now (the test's cleanup stops it again: a no-op).
func stopRuntime(t testing.TB, rt interface{ Stop(context.Context) error }) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, rt.Stop(ctx))
}

// Issue 19 (7): the pipeline is switched from batch to sync mode (a
// restart with the new triage.toml) while its lines are in a live provider
// batch. The woken jobs do not call synchronously while the provider batch
// still runs, and the key's submitter still collects that batch although
// no pipeline on the key is in batch mode now: each record is billed once,
// by the provider batch, and completes with its answer.
func TestSwitchToSyncModeWaitsForTheLinesInFlight(t *testing.T) {
	t.Parallel()
	const n = 4
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)}}
	b, clock := setupBatch(t, sc, "batch", tweaks{})
	b.oneGather(n, 5*time.Second) // one provider batch, however slowly the jobs write their lines
	b.enqueue(t, "b1", records(n, nil))
	rt := b.start(t)
	eventually(t, 30*time.Second, "the provider batch is submitted", func() bool { return b.providerBatches(t)["submitted"] == 1 && b.lineStates(t)["submitted"] == n })
	eventually(t, 30*time.Second, "every job sleeps", func() bool { return b.jobStates(t)["scheduled"] == n })
	stopRuntime(t, rt)

	cfg, err := config.Parse([]byte(strings.Replace(b.tomlText, `mode = "batch"`, `mode = "sync"`, 1)), "test.toml")
	require.NoError(t, err)
	require.False(t, cfg.Pipelines[0].UsesBatch())
	b.opts.Config = cfg
	b.start(t)
	b.wakeAll(t, "b1", "")
	eventually(t, 30*time.Second, "the woken jobs sleep again", func() bool { return b.jobStates(t)["scheduled"] == n })
	require.Zero(t, b.fake.Stats().BilledCalls, "no synchronous call while the lines are in the provider batch")

	clock.Advance(2 * time.Hour) // the provider batch ends
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	require.Equal(t, map[string]int{"collected": 1}, b.providerBatches(t), "collected with no batch pipeline on the key")
	require.Equal(t, n, b.fake.Stats().Batches.Succeeded)
	b.requireBilledOnce(t)
}

// Issue 19 (8): jobs whose lines are in a live provider batch run again
// when their run count or their snoozes are past the pipeline's bounds
// (the checks that dead-letter a job before it looks at anything). They
// are not dead-lettered while the provider runs (and bills) their lines:
// they wait, apply the paid answers, and complete, each billed once, every
// attempt finished.
func TestJobsPastTheirBoundsWaitForTheirLines(t *testing.T) {
	t.Parallel()
	const n = 4
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)}}
	b, clock := setupBatch(t, sc, "batch", tweaks{})
	b.oneGather(n, 5*time.Second) // one provider batch, however slowly the jobs write their lines
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	eventually(t, 30*time.Second, "the provider batch is submitted", func() bool { return b.providerBatches(t)["submitted"] == 1 && b.lineStates(t)["submitted"] == n })
	eventually(t, 30*time.Second, "every job sleeps", func() bool { return b.jobStates(t)["scheduled"] == n })
	// Half past max_attempts runs (worker errors), half past max_snoozes.
	_, err := b.db.Pool.Exec(context.Background(), `UPDATE river_job SET
		attempt = CASE WHEN id % 2 = 0 THEN 50 ELSE attempt END,
		metadata = CASE WHEN id % 2 = 1 THEN metadata || '{"snoozes": 1000}' ELSE metadata END
		WHERE args->>'batch' = 'b1'`)
	require.NoError(t, err)
	b.wakeAll(t, "b1", "")
	eventually(t, 30*time.Second, "the woken jobs run", func() bool {
		return b.jobStates(t)["scheduled"]+b.jobStates(t)["cancelled"] == n && b.jobStates(t)["available"] == 0
	})
	require.Zero(t, b.status(t, "b1").DeadLettered, "no record dead-lettered while its line is in a live provider batch")

	clock.Advance(2 * time.Hour)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed, "the paid answers are applied")
	require.Zero(t, st.DeadLettered)
	require.Equal(t, map[string]int{"applied": n}, b.lineStates(t))
	b.requireBilledOnce(t)
}

// A night of the simulator (seed 30076): the pipeline is switched from
// batch to sync mode while some lines were never sent (they wait for the
// next provider batch). No process forms provider batches for the key any
// more, so the jobs sleeping for those lines must be woken to take their
// lines back and call synchronously; before, they slept for the whole
// line wait (an hour) with nobody to wake them.
func TestSwitchToSyncModeSendsTheLinesNotYetSent(t *testing.T) {
	t.Parallel()
	const n = 4
	b, _ := setupBatch(t, fakeprovider.Scenario{}, "batch", tweaks{})
	tuning := batchTuning
	tuning.Gather = 10 * time.Hour // on the virtual clock: never ripe
	b.opts.Batch = tuning
	b.enqueue(t, "b1", records(n, nil))
	rt := b.start(t)
	eventually(t, 30*time.Second, "every job sleeps for its pending line", func() bool {
		return b.jobStates(t)["scheduled"] == n && b.lineStates(t)["pending"] == n
	})
	stopRuntime(t, rt)

	cfg, err := config.Parse([]byte(strings.Replace(b.tomlText, `mode = "batch"`, `mode = "sync"`, 1)), "test.toml")
	require.NoError(t, err)
	b.opts.Config = cfg
	b.start(t)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed, "the records go synchronously")
	require.Zero(t, b.fake.Stats().Batches.Created, "no provider batch")
	require.Equal(t, n, b.fake.Stats().BilledCalls)
	b.requireBilledOnce(t)
}

// Issue 19, found by reading: a job cancelled by hand while its line is in
// a live provider batch. The provider answers (and bills) the line; the
// record was dead-lettered cancelled_by_hand. A requeue of that record
// applies the paid answer with no call: the provider gets no second line
// for it, the record completes with the answer it paid for, and the
// ledger counts its attempt once.
func TestRequeueAfterAHandCancelAppliesThePaidAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 3
	b, clock, dl := cancelledInALiveBatch(t, n)

	clock.Advance(2 * time.Hour) // the provider batch ends: every line answered and billed
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n-1, st.Completed)
	attemptSettled := func() bool {
		var open int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM triage_attempt
			WHERE batch = 'b1' AND record_id = 'r002' AND status = 'intent'`).Scan(&open))
		return open == 0
	}
	eventually(t, 30*time.Second, "r002's paid answer is settled in the ledger", attemptSettled)
	require.Equal(t, n, b.fake.Stats().Batches.Succeeded)

	res, err := operator.Requeue(ctx, b.db.Pool, b.cfg, operator.Selection{IDs: []int64{dl}}, operator.RequeueOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Requeued)
	// Whatever the requeued job does, it gets the time to do it: a new line
	// would go in a second provider batch, which ends an hour later.
	eventually(t, 60*time.Second, "r002 completes", func() bool {
		clock.Advance(2 * time.Hour)
		return b.status(t, "b1").Completed == n
	})
	stats := b.fake.Stats()
	require.Equal(t, n, stats.Batches.Lines, "no second line for r002: its paid answer is applied")
	require.Zero(t, stats.BilledCalls-stats.Batches.Succeeded, "no synchronous call")
	b.requireBilledOnce(t)
	var attempts int
	var result string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM triage_attempt WHERE batch = 'b1' AND record_id = 'r002'`).Scan(&attempts))
	require.Equal(t, 1, attempts, "one attempt in the ledger for r002")
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT output::text FROM triage_result WHERE batch = 'b1' AND record_id = 'r002'`).Scan(&result))
	require.NotEmpty(t, result)
	require.Equal(t, map[string]int{"applied": n}, b.lineStates(t))
}

// Found by the night simulator (seed 7017, a loaded machine): a job runs
// again after its record was completed (River's rescuer re-runs a job
// whose run outlasted RescueAfter while that run was still storing its
// result) and is past its bounds (here its MaxAge). The checks that end a
// record before anything is read dead-lettered it: the record was both
// completed and dead-lettered, and its batch never settled. The run finds
// the result first and completes.
func TestARunOfACompletedRecordPastItsBoundsDoesNotDeadLetterIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, fakeprovider.Scenario{NoReplay: true}, tweaks{})
	b.enqueue(t, "b1", records(1, nil))
	b.start(t)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 1, st.Completed)
	// The same job runs again, past MaxAge.
	_, err := b.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now(), finalized_at = NULL,
		created_at = now() - interval '30 days' WHERE args->>'batch' = 'b1'`)
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the job ran again", func() bool { return b.jobStates(t)["available"] == 0 && b.jobStates(t)["running"] == 0 })
	st = b.status(t, "b1")
	require.Equal(t, 1, st.Completed)
	require.Zero(t, st.DeadLettered, "a completed record is not dead-lettered")
	require.Equal(t, map[string]int{"completed": 1}, b.jobStates(t))
	require.Equal(t, 1, b.fake.Stats().BilledCalls)
}

// A night of the simulator (seed 30080): a batch-mode key runs out of
// money and is never topped up. Its lines are never sent (each create is
// refused while the breaker is open), so nothing holds the records: like a
// synchronous job, each is dead-lettered once it has waited longer than
// MaxAge, its line taken back at $0. Before, the jobs slept for the whole
// line wait (an hour) on lines no provider batch would ever take.
func TestUnsentLinesOfAnExhaustedKeyEndAtMaxAge(t *testing.T) {
	t.Parallel()
	const n = 6
	sc := fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}}
	b, _ := setupBatch(t, sc, "batch", tweaks{})
	b.opts.MaxAge = 3 * time.Second
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	eventually(t, 30*time.Second, "the key trips", func() bool { return b.hooks.count("key_exhausted") >= 1 })
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.DeadLettered)
	dls := b.deadLetters(t, "b1")
	for _, dl := range dls {
		require.Equal(t, "snoozed_out", dl.Reason, "record %s", dl.RecordID)
	}
	require.Zero(t, b.lineStates(t)["pending"], "no line left waiting")
	require.Zero(t, b.fake.Stats().BilledCalls)
}

// cancelledInALiveBatch puts n records in batch mode into one provider
// batch that runs for an hour, cancels r002's job by hand while its line is
// in it, and waits until the sweep dead-letters the record; it returns
// the dead letter's id with the running world.
func cancelledInALiveBatch(t *testing.T, n int) (*testBundle, *testClock, int64) {
	t.Helper()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)}}
	b, clock := setupBatch(t, sc, "batch", tweaks{})
	b.oneGather(n, 5*time.Second)             // one provider batch, however slowly the jobs write their lines
	b.opts.SpendCheck = 20 * time.Millisecond // the sweep that dead-letters cancelled jobs
	b.enqueue(t, "b1", records(n, nil))
	rt := b.start(t)
	eventually(t, 30*time.Second, "the provider batch is submitted", func() bool { return b.providerBatches(t)["submitted"] == 1 && b.lineStates(t)["submitted"] == n })
	eventually(t, 30*time.Second, "every job sleeps", func() bool { return b.jobStates(t)["scheduled"] == n })
	_, err := rt.River().JobCancel(context.Background(), b.jobOf(t, "b1", "r002"))
	require.NoError(t, err)
	eventually(t, 30*time.Second, "r002 is dead-lettered", func() bool { return b.deadLetterIDOf(t, "b1", "r002") != 0 })
	return b, clock, b.deadLetterIDOf(t, "b1", "r002")
}

// The same key exhausted for good with an hour between probes: the records
// past MaxAge end in the dead letters at MaxAge, all of them, not one per
// probe (night simulator seed 120423: 116 records past MaxAge waited in the
// key's paused queue, one dead-lettered per probe). Ending a record sends
// nothing, so no breaker holds it.
func TestUnsentLinesEndAtMaxAgeWithoutWaitingForProbes(t *testing.T) {
	t.Parallel()
	const n = 6
	sc := fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}}
	b, _ := setupBatch(t, sc, "batch", tweaks{probeInterval: "1h"})
	b.opts.MaxAge = 3 * time.Second
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	eventually(t, 30*time.Second, "the key trips", func() bool { return b.hooks.count("key_exhausted") >= 1 })
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.DeadLettered)
	for _, dl := range b.deadLetters(t, "b1") {
		require.Equal(t, "snoozed_out", dl.Reason, "record %s", dl.RecordID)
	}
	require.Zero(t, b.lineStates(t)["pending"], "no line left waiting")
	require.Zero(t, b.fake.Stats().BilledCalls)
	require.True(t, keyOpen(t, b), "the key stays exhausted: ending records is no probe")
}

// The crossing of the probe queue and the fallback: the primary's breaker
// opens, for good as far as this test goes, while a provider batch holds
// every line of b1, and the pipeline has a fallback on another vendor.
// The batch ends: each line holds a paid answer, and the supervisor moves
// the jobs out of the paused queue into the probe queue
// (rivertable.MoveJobsThatCallNot), where they run with the key still
// exhausted. Each paid answer is applied once, decoded in the primary's
// format and priced at its model: none is moved to the fallback, none is
// sent again, none dead-lettered, and no breaker closes.
func TestPaidAnswerInTheProbeQueueIsAppliedOnTheSendingKey(t *testing.T) {
	t.Parallel()
	const n = 5
	fb, fbURL := workertest.Provider(t, fakeprovider.Scenario{APIKey: workertest.APIKey, NoReplay: true})
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)}}
	b, clock := setupBatch(t, sc, "batch", tweaks{extraPipeline: anthropicFallback(fbURL)})
	b.oneGather(n, 5*time.Second) // one provider batch, however slowly the jobs write their lines
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	eventually(t, 30*time.Second, "b1's provider batch is submitted", func() bool { return b.providerBatches(t)["submitted"] == 1 })
	eventually(t, 30*time.Second, "b1's jobs sleep", func() bool { return b.jobStates(t)["scheduled"] == n })

	b.openBreaker(t, workertest.Key)
	eventually(t, 30*time.Second, "the key's queue is paused", func() bool {
		var paused bool
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			`SELECT EXISTS (SELECT 1 FROM river_queue WHERE name = $1 AND paused_at IS NOT NULL)`,
			keys.QueueName(workertest.Key)).Scan(&paused))
		return paused
	})
	clock.Advance(2 * time.Hour) // the primary's provider batch ends, every line answered (paid)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed, "every paid answer applied while the key is exhausted")
	require.Zero(t, st.DeadLettered)
	require.Zero(t, st.Fallback, "no record moved to the fallback")
	require.EqualValues(t, n, st.Models["fake-model"], "answered and priced as the primary's")
	for row, err := range ledger.Results(context.Background(), b.db.Pool, "b1") {
		require.NoError(t, err)
		require.Equal(t, "fake-model", row.Model, "%s", row.ID)
	}
	require.Equal(t, map[string]int{keys.ProbeQueueName(workertest.Key): n}, b.queueCount(t, "b1"),
		"each job ran in the probe queue, moved there from the paused queue")
	require.True(t, keyOpen(t, b), "applying answers closes no breaker")
	require.Zero(t, b.hooks.count("key_resumed"))
	stats := b.fake.Stats()
	require.Equal(t, n, stats.Batches.Succeeded)
	require.Equal(t, 1, stats.Batches.Created)
	require.Equal(t, n, stats.Batches.Lines, "no line sent again")
	require.Zero(t, stats.Requests-stats.Batches.Succeeded, "no synchronous call on the primary")
	fbStats := fb.Stats()
	require.Zero(t, fbStats.Requests, "nothing sent to the fallback")
	require.Zero(t, fbStats.Batches.Lines, "nothing sent to the fallback")
	modes := b.countBy(t, "SELECT mode || ':' || model || ':' || status, count(*) FROM triage_attempt GROUP BY 1")
	require.Equal(t, map[string]int{"batch:fake-model:ok": n}, modes, "one attempt per record, the primary's batch line")
	b.requireBilledOnceWith(t, fb)
}
