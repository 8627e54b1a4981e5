package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/operator"
)

// responsesKey is the [[keys]] text of an OpenAI key speaking the
// Responses API.
const responsesKey = "format = \"responses\"\n"

// A Responses-API key runs the same batch, with faults, in each mode:
// every record completed, the ledger equal to the provider's bill, nothing
// billed twice, with replay off.
func TestResponsesKeyRunsTheBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                string
		extraKey, extraPipe string
	}{
		{name: "sync"},
		{name: "stream", extraPipe: "stream = true\nstream_idle_timeout = \"2s\"\n"},
		{name: "background", extraKey: "background = true\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc := fakeprovider.Scenario{NoReplay: true, RecordScripts: map[string][]fakeprovider.Step{
				"r002": steps(act(fakeprovider.ActionRateLimit)),
				"r005": steps(act(fakeprovider.ActionOverloaded)),
			}}
			b := setup(t, sc, tweaks{timeout: "5s", extraKey: responsesKey + tc.extraKey, extraPipeline: tc.extraPipe})
			const n = 8
			b.enqueue(t, "b1", records(n, nil))
			b.start(t)
			st := b.waitSettled(t, "b1", 30*time.Second)
			require.Equal(t, n, st.Completed, "every record completed")
			stats := b.fake.Stats()
			require.Zero(t, stats.DoubleBilledRecords, "nothing billed twice")
			require.Equal(t, n, stats.BilledCalls)
			require.Equal(t, stats.Requests, stats.ResponsesAPI, "every call went to the Responses API")
			if tc.extraKey != "" {
				require.Equal(t, n, stats.BackgroundCreated, "each record's response created once, in background mode")
				require.GreaterOrEqual(t, stats.BackgroundPolls, 2*n, "and polled to its end")
			}
			require.Zero(t, st.PossiblyBilledUSD)
			require.InDelta(t, stats.BilledUSD, st.SpendUSD, 1e-9, "the ledger equals the provider's bill")
			for id, rs := range stats.ByRecord {
				require.Equal(t, 1, rs.Answers, "%s: one whole answer", id)
			}
		})
	}
}

// A stream that ends in response.failed is decided by its code, not as
// ambiguous: server_error is retried as transient (the failed call's
// usage is in the ledger), insufficient_quota trips the exhausted breaker.
func TestResponsesStreamFailedByCode(t *testing.T) {
	t.Parallel()
	t.Run("server_error", func(t *testing.T) {
		t.Parallel()
		sc := fakeprovider.Scenario{NoReplay: true, RecordScripts: map[string][]fakeprovider.Step{
			"r002": {{Action: fakeprovider.ActionStreamError, Code: "server_error"}},
		}}
		b := setup(t, sc, tweaks{timeout: "5s", extraKey: responsesKey, extraPipeline: "stream = true\nambiguous_retries = 0\n"})
		const n = 4
		b.enqueue(t, "b1", records(n, nil))
		b.start(t)
		st := b.waitSettled(t, "b1", 30*time.Second)
		require.Equal(t, n, st.Completed, "the failed stream is retried, not dead-lettered as ambiguous")
		stats := b.fake.Stats()
		require.Equal(t, 2, stats.ByRecord["r002"].Requests)
		require.Equal(t, 1, stats.ByRecord["r002"].Answers, "one whole answer")
		require.Zero(t, st.PossiblyBilledUSD, "the failed call's usage is known")
		require.InDelta(t, stats.BilledUSD, st.SpendUSD, 1e-9, "the ledger equals the provider's bill, the failed call's part included")
		require.Equal(t, map[string]int{"transient/stream_server_error": 1}, b.countBy(t,
			"SELECT class || '/' || reason, count(*) FROM triage_attempt WHERE status <> 'ok' GROUP BY 1"))
	})
	t.Run("insufficient_quota", func(t *testing.T) {
		t.Parallel()
		sc := fakeprovider.Scenario{NoReplay: true, Script: []fakeprovider.Step{{Action: fakeprovider.ActionStreamError, Code: "insufficient_quota", Chunks: 0}}}
		b := setup(t, sc, tweaks{timeout: "5s", concurrency: 1, probeInterval: "300ms", extraKey: responsesKey, extraPipeline: "stream = true\nambiguous_retries = 0\n"})
		const n = 4
		b.enqueue(t, "b1", records(n, nil))
		b.start(t)
		st := b.waitSettled(t, "b1", 30*time.Second)
		require.Equal(t, n, st.Completed)
		require.Equal(t, 1, b.hooks.count("key_exhausted"), "the exhausted breaker tripped: %s", b.hooks.all())
		stats := b.fake.Stats()
		require.InDelta(t, stats.BilledUSD, st.SpendUSD, 1e-9)
		require.Equal(t, map[string]int{"exhausted/stream_billing_quota": 1}, b.countBy(t,
			"SELECT class || '/' || reason, count(*) FROM triage_attempt WHERE status <> 'ok' GROUP BY 1"))
	})
}

// A worker stopped while its background responses run leaves their ids
// on the attempts; the next worker polls them instead of creating them
// again: each response created and billed once, the ledger equal to the
// bill, nothing left possibly billed.
func TestResponsesBackgroundResumedAfterRestart(t *testing.T) {
	t.Parallel()
	// Under every policy: polling a stored response id is not a resend,
	// so neither dead_letter nor a spent ambiguous_retries stops it.
	for _, policy := range []string{"retry", "dead_letter"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			testResponsesBackgroundResumedAfterRestart(t, "ambiguous = \""+policy+"\"\n")
		})
	}
}

func testResponsesBackgroundResumedAfterRestart(t *testing.T, policy string) {
	sc := fakeprovider.Scenario{NoReplay: true, GenerationTime: fakeprovider.Duration(2 * time.Second)}
	b := setup(t, sc, tweaks{timeout: "10s", concurrency: 4, extraKey: responsesKey + "background = true\n" + policy})
	const n = 4
	b.enqueue(t, "b1", records(n, nil))
	rt := b.newRuntime(t)
	require.NoError(t, rt.Start(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.fake.WaitFor(ctx, func(st fakeprovider.Stats) bool {
		return st.BackgroundCreated == n && st.BackgroundPolls >= n
	}), "every response created and polled while it runs")
	stop, cancelStop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_ = rt.Stop(stop)
	cancelStop()
	stopped := b.fake.Stats()
	require.Zero(t, stopped.BilledCalls, "stopped before any response ended")
	var withID int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM triage_attempt WHERE response_id IS NOT NULL AND status IN ('intent', 'possibly_billed')`).Scan(&withID))
	require.Equal(t, n, withID, "each running response's id is on its attempt")

	b.start(t)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	stats := b.fake.Stats()
	require.Equal(t, n, stats.BackgroundCreated, "no response created twice")
	require.Equal(t, n, stats.BilledCalls)
	require.Zero(t, stats.DoubleBilledRecords)
	require.Zero(t, st.PossiblyBilledUSD, "the stopped runs' attempts are settled by the polled answer")
	require.InDelta(t, stats.BilledUSD, st.SpendUSD, 1e-9, "the ledger equals the provider's bill")
	require.Equal(t, map[string]int{"found": n}, lostAnswers(t, b), "each stopped run's answer was found by its response id, not resent")
	amb, err := ledger.AmbiguityByKey(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, amb, 1)
	require.Zero(t, amb[0].PossiblyDoubleBilled)
}

// A batch cancelled by hand while its background responses run no longer
// wants their answers: each is cancelled at the provider (never billed)
// and its record dead-lettered cancelled.
func TestResponsesBackgroundCancelledWithTheBatch(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{NoReplay: true, GenerationTime: fakeprovider.Duration(time.Minute)}
	b := setup(t, sc, tweaks{timeout: "2m", concurrency: 4, extraKey: responsesKey + "background = true\n"})
	const n = 4
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, b.fake.WaitFor(ctx, func(st fakeprovider.Stats) bool {
		return st.BackgroundCreated == n && st.BackgroundPolls >= n
	}))
	_, err := operator.CancelBatch(context.Background(), b.db.Pool, "b1", operator.ControlOptions{Schema: b.db.Schema})
	require.NoError(t, err)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.DeadLettered)
	stats := b.fake.Stats()
	require.Equal(t, n, stats.BackgroundCancels, "each running response cancelled at the provider")
	require.Zero(t, stats.BilledCalls, "a cancelled response is not billed")
	require.Equal(t, map[string]int{"cancelled": n}, b.countBy(t, "SELECT reason, count(*) FROM triage_dead_letter GROUP BY 1"))
}

// Batch mode on a Responses-API key: its lines go to "/v1/responses" (a
// background key's lines too: the batch is the background), the fake's
// Batch API answers them with response objects, and each record is
// completed from its line, billed once at batch prices.
func TestResponsesBatchMode(t *testing.T) {
	t.Parallel()
	b, _ := setupBatch(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, "batch",
		tweaks{concurrency: 8, extraKey: responsesKey + "background = true\n"})
	const n = 40
	b.enqueue(t, "b1", records(n, poisoned(10)))
	b.start(t)
	st := b.waitSettled(t, "b1", 2*time.Minute)
	require.Equal(t, n-n/10, st.Completed)
	require.Equal(t, n/10, st.DeadLettered)
	stats := b.fake.Stats()
	require.Equal(t, n, stats.Batches.Lines, "each record one batch line")
	require.Equal(t, stats.Requests, stats.ResponsesAPI, "every line ran on the Responses API")
	require.Zero(t, stats.BackgroundCreated, "no line is a background response")
	require.Zero(t, stats.DoubleBilledRecords)
	costUSD, _, byMode := b.ledgerBill(t)
	require.Equal(t, map[string]int{"batch": n}, byMode)
	require.InDelta(t, stats.BilledUSD, costUSD, 1e-9, "the ledger is the provider's bill")
	for _, d := range b.deadLetters(t, "b1") {
		require.Equal(t, "rejected", d.Class, d.RecordID)
		require.Equal(t, 400, d.HTTPStatus, d.RecordID)
	}
}
