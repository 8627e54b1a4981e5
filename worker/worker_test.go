package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

func steps(ss ...fakeprovider.Step) []fakeprovider.Step { return ss }
func status(n int) fakeprovider.Step                    { return fakeprovider.Step{Status: n} }
func act(a fakeprovider.Action) fakeprovider.Step       { return fakeprovider.Step{Action: a} }

func TestTransientRecoversAfterBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Script: steps(status(503), status(503), status(200))}, tweaks{})
	b.enqueue(t, "b1", records(1, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 1, st.Completed)
	require.Equal(t, 3, b.fake.Stats().Requests, "two 503s and the success reach the provider, nothing more")
	require.Equal(t, 3, st.Calls)
	require.Empty(t, b.deadLetters(t, "b1"))
}

func TestTransientDeadLettersAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Script: steps(status(503), status(503), status(503), status(503), status(503), status(503), status(200))}, tweaks{})
	b.enqueue(t, "b1", records(1, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 1, st.DeadLettered)
	require.Equal(t, 6, b.fake.Stats().Requests, "max_attempts 6: six calls, then stop")
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Equal(t, "transient", dls[0].Class)
	require.Equal(t, "retries_exhausted", dls[0].Reason)
	require.Equal(t, 503, dls[0].HTTPStatus)
	require.Equal(t, 6, dls[0].Attempts)
}

func TestRejectedCostsOneCall(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, tweaks{})
	b.enqueue(t, "b1", records(5, func(i int) string {
		if i == 2 {
			return `,"note":"POISON"`
		}
		return ""
	}))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 4, st.Completed)
	require.Equal(t, 1, st.DeadLettered)
	stats := b.fake.Stats()
	require.Equal(t, 1, stats.ByRecord["r003"].Requests, "a rejected request is never resent")
	require.Equal(t, 5, stats.Requests)
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Equal(t, "r003", dls[0].RecordID)
	require.Equal(t, "rejected", dls[0].Class)
	require.Equal(t, 400, dls[0].HTTPStatus)
	require.NotEmpty(t, dls[0].VendorCode, "the vendor's own code is kept")
	require.NotContains(t, string(dls[0].Request), "sk-test-secret")
	require.NotContains(t, dls[0].ErrorExcerpt, "sk-test-secret")
}

// A throttle whose retry-after says the whole key must wait (longer than
// KeyPauseAfter) pauses the key fleet-wide; the job costs no attempt.
func TestThrottledDoesNotBurnAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{Script: steps(
		fakeprovider.Step{Action: fakeprovider.ActionRateLimit, RetryAfter: fakeprovider.Duration(time.Second)},
		status(200))}, tweaks{maxAttempts: 1})
	b.opts.KeyPauseAfter = 500 * time.Millisecond
	b.enqueue(t, "b1", records(1, nil))
	rt := b.start(t)

	// The pause is visible fleet-wide while it lasts...
	eventually(t, 10*time.Second, "the key is paused", func() bool {
		p, err := rt.Store().ActivePause(context.Background(), "main")
		require.NoError(t, err)
		return p != nil
	})
	// ...and ends by itself; the job then completes without burning its
	// single attempt (max_attempts 1).
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 1, st.Completed)
	require.Equal(t, 2, b.fake.Stats().Requests)
	p, err := rt.Store().ActivePause(context.Background(), "main")
	require.NoError(t, err)
	require.Nil(t, p)
	var attempt int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT attempt FROM river_job").Scan(&attempt))
	require.Equal(t, 1, attempt, "a throttle is a snooze, not an attempt")
}

// A single 429 with a short wait snoozes only the job that got it, for the
// wait the provider named: the key is never paused, the other records go
// on, and the throttled one completes without burning its single attempt.
func TestSingleThrottleSnoozesOnlyItsJob(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{RecordScripts: map[string][]fakeprovider.Step{"r001": steps(
		fakeprovider.Step{Action: fakeprovider.ActionRateLimit, RetryAfter: fakeprovider.Duration(time.Second)},
		status(200))}}, tweaks{maxAttempts: 1})
	b.enqueue(t, "b1", records(20, nil))
	rt := b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 20, st.Completed)
	require.Equal(t, 21, b.fake.Stats().Requests, "one throttled call, then each record once")
	pause, err := rt.Store().ActivePause(context.Background(), "main")
	require.NoError(t, err)
	require.Nil(t, pause)
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM triage_pause").Scan(&n))
	require.Zero(t, n, "the key was never paused")
	var attempt int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		"SELECT attempt FROM river_job WHERE args->>'record_id' = 'r001'").Scan(&attempt))
	require.Equal(t, 1, attempt, "a throttle is a snooze, not an attempt")
}

// The one test with the fake provider's replay on: it is about an endpoint
// known to replay (idempotent_replay = true), where a successful resend
// settles the unanswered send. Real providers do not replay; the other
// money tests run with NoReplay.
func TestAmbiguousRetryReusesIdempotencyKeyAndBillsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{RecordScripts: map[string][]fakeprovider.Step{"r001": steps(act(fakeprovider.ActionHang))}},
		tweaks{timeout: "3s", extraKey: "idempotent_replay = true\n"})
	b.enqueue(t, "b1", records(1, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 1, st.Completed)
	stats := b.fake.Stats()
	rec := stats.ByRecord["r001"]
	require.Equal(t, 2, rec.Requests)
	require.Len(t, rec.IdempotencyKeys, 2)
	require.NotEmpty(t, rec.IdempotencyKeys[0])
	require.Equal(t, rec.IdempotencyKeys[0], rec.IdempotencyKeys[1], "the retry reuses the idempotency key")
	require.Equal(t, 1, rec.Billed, "billed once")
	require.Equal(t, 0, stats.DoubleBilledRecords)

	attempts, err := ledger.ListAttempts(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	byStatus := map[ledger.AttemptStatus]int{}
	for _, a := range attempts {
		byStatus[a.Status]++
	}
	require.Equal(t, map[ledger.AttemptStatus]int{ledger.AttemptResolved: 1, ledger.AttemptOK: 1}, byStatus,
		"the hung call was possibly billed, then resolved by the successful retry")
	require.Zero(t, st.PossiblyBilledUSD)
}

func TestExhaustedKeyStopsCallsAndResumesAfterTopUp(t *testing.T) {
	t.Parallel()
	// Each call costs a few micro-dollars; the balance covers about 20.
	b := setup(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0.0002}}, tweaks{concurrency: 4, probeInterval: "400ms"})
	b.enqueue(t, "b1", records(200, nil))
	b.start(t)

	eventually(t, 20*time.Second, "the key_exhausted alert", func() bool { return b.hooks.count("key_exhausted") == 1 })
	first := b.fake.Stats()
	done := first.ByStatus[200]
	require.Less(t, done, 200)

	// Let several probe intervals pass while the key stays exhausted.
	const intervals = 4
	deadline := time.Now().Add(intervals * 400 * time.Millisecond)
	eventually(t, 10*time.Second, "probe intervals pass", func() bool { return time.Now().After(deadline) })
	mid := b.fake.Stats()
	// At most the calls in flight when the breaker opened, plus one probe per
	// interval (+1 for the interval in progress).
	require.LessOrEqual(t, mid.RequestsWhileExhausted, 4+intervals+1,
		"an exhausted key must not be hammered: %d requests while exhausted", mid.RequestsWhileExhausted)
	st := b.status(t, "b1")
	require.Zero(t, st.DeadLettered, "exhaustion dead-letters nothing")
	states := b.jobStates(t)
	require.Zero(t, states["discarded"]+states["cancelled"], "jobs stay queued untouched: %v", states)
	require.Equal(t, 200-st.Completed, states["available"]+states["scheduled"]+states["running"]+states["retryable"], "%v", states)

	b.fake.TopUp(1)
	st = b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, 200, st.Completed)
	require.Zero(t, b.fake.Stats().DoubleBilledRecords)
	eventually(t, 10*time.Second, "the key_resumed alert", func() bool { return b.hooks.count("key_resumed") >= 1 })
	require.Equal(t, 1, b.hooks.count("key_exhausted"), "one alert per exhaustion, not one per worker or job: %s", b.hooks.all())
}

// An answer that never comes, twice: the retry reuses the key, and after
// ambiguous_retries (1) the record goes to the dead letters instead of being
// sent a third time.
func TestAmbiguousRetriesExhaustedDeadLetters(t *testing.T) {
	t.Parallel()
	// The timeout is well under the provider's latency, yet long enough for
	// each send to reach it on a loaded machine (at 200 ms a resend was cut
	// before the provider saw it: expected 2 requests, actual 1).
	b := setup(t, fakeprovider.Scenario{Latency: fakeprovider.Duration(30 * time.Second), NoReplay: true}, tweaks{timeout: "2s"})
	b.enqueue(t, "b1", records(1, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 1, st.DeadLettered)
	rec := b.fake.Stats().ByRecord["r001"]
	require.Equal(t, 2, rec.Requests, "one send and one retry, no third")
	require.Equal(t, rec.IdempotencyKeys[0], rec.IdempotencyKeys[1])
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Equal(t, "ambiguous", dls[0].Class)
	require.Equal(t, "ambiguous_retries_exhausted", dls[0].Reason)
	require.Positive(t, st.PossiblyBilledUSD, "the unanswered sends stay possibly billed")
	require.Equal(t, 2, rec.Billed, "replay off, as at real providers: both sends were billed, and the ledger says so")
}

// A 200 whose body is not the vendor's format is never retried: it is
// dead-lettered as invalid_output, and since the provider may have billed it
// the attempt stays possibly billed at its estimate.
func TestGarbage200IsInvalidOutputAndPossiblyBilled(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{RecordScripts: map[string][]fakeprovider.Step{"r002": steps(act(fakeprovider.ActionGarbage))}}, tweaks{})
	b.enqueue(t, "b1", records(3, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, 1, b.fake.Stats().ByRecord["r002"].Requests, "an unusable answer is not resent")
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Equal(t, "ok", dls[0].Class)
	require.Equal(t, "invalid_output", dls[0].Reason)
	require.Positive(t, st.PossiblyBilledUSD)
}

// Where the endpoint is not known to replay a repeated Idempotency-Key, a
// successful resend does not make the unanswered send free: it stays
// possibly billed, an upper bound to reconcile with the invoice.
func TestAmbiguousSendStaysPossiblyBilledWithoutKnownReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{RecordScripts: map[string][]fakeprovider.Step{"r001": steps(act(fakeprovider.ActionHang))}, NoReplay: true},
		tweaks{timeout: "3s"})
	b.enqueue(t, "b1", records(1, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 1, st.Completed)
	require.Positive(t, st.PossiblyBilledUSD)
	attempts, err := ledger.ListAttempts(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	byStatus := map[ledger.AttemptStatus]int{}
	for _, a := range attempts {
		byStatus[a.Status]++
	}
	require.Equal(t, map[ledger.AttemptStatus]int{ledger.AttemptPossiblyBilled: 1, ledger.AttemptOK: 1}, byStatus)
	require.Equal(t, 1, b.fake.Stats().DoubleBilledRecords, "the provider billed both sends: the possibly billed attempt is real money")
}
