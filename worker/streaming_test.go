package worker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/operator"
	"github.com/triage-dev/triage/worker/workertest"
)

// answerOf is the fake provider's whole answer to a record of the test
// pipeline (its system prompt asks for JSON).
func answerOf(t *testing.T, b *testBundle, rec ledger.Record) string {
	t.Helper()
	p, err := b.cfg.Pipeline(workertest.Pipeline)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(rec.Data, &m))
	prompt, err := p.Render(m)
	require.NoError(t, err)
	return fakeprovider.ExpectedAnswer(prompt, true)
}

func attemptsOf(t *testing.T, b *testBundle, batch string) []ledger.Attempt {
	t.Helper()
	as, err := ledger.ListAttempts(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: batch})
	require.NoError(t, err)
	return as
}

// A stream cut after a few chunks keeps its partial text in the ledger and
// the dead letter, and bills once: the provider billed one call, and the
// ledger counts what arrived as spent and the rest of the estimate as
// possibly billed, never less than the provider billed.
func TestCutStreamKeepsItsPartialAndBillsOnce(t *testing.T) {
	t.Parallel()
	for _, vendor := range []string{"openai", "anthropic"} {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			cut := fakeprovider.Step{Action: fakeprovider.ActionCutStream, Chunks: 3}
			b := setup(t, fakeprovider.Scenario{NoReplay: true, RecordScripts: map[string][]fakeprovider.Step{"r002": {cut}}},
				tweaks{vendor: vendor, extraPipeline: "stream = true\nambiguous_retries = 0\n"})
			recs := records(3, nil)
			b.enqueue(t, "b1", recs)
			b.start(t)
			st := b.waitSettled(t, "b1", 20*time.Second)
			require.Equal(t, 2, st.Completed, "the other records stream whole")
			require.Equal(t, 1, st.DeadLettered)

			fs := b.fake.Stats()
			require.Equal(t, 3, fs.Requests)
			require.Equal(t, 1, fs.ByRecord["r002"].Billed, "the cut call is billed once")
			require.Zero(t, fs.DoubleBilledRecords)

			want := answerOf(t, b, recs[1])[:36] // three chunks of 12 characters
			dls := b.deadLetters(t, "b1")
			require.Len(t, dls, 1)
			require.Equal(t, "ambiguous", dls[0].Class)
			det, err := operator.GetDeadLetter(context.Background(), b.db.Pool, dls[0].ID)
			require.NoError(t, err)
			require.NotNil(t, det.Partial, "dlq show has the partial output")
			require.Equal(t, want, det.Partial.Text)
			require.Equal(t, 9, det.Partial.OutputTokens, "36 characters, about four a token, as the provider counted")

			var cutAttempt ledger.Attempt
			n := 0
			for _, a := range attemptsOf(t, b, "b1") {
				if a.RecordID == "r002" {
					cutAttempt, n = a, n+1
				}
			}
			require.Equal(t, 1, n, "one call for the cut record")
			require.Equal(t, ledger.AttemptPossiblyBilled, cutAttempt.Status)
			require.NotNil(t, cutAttempt.PartialText)
			require.Equal(t, want, *cutAttempt.PartialText)

			// The whole answers' usage came from the streams themselves
			// (include_usage, message_delta): billed and ledger agree on them.
			var billedByProvider float64
			var outTokens int
			for _, a := range attemptsOf(t, b, "b1") {
				if a.RecordID != "r002" {
					billedByProvider += a.CostUSD
				}
				outTokens += a.OutputTokens
			}
			require.Equal(t, fs.OutputTokens, outTokens, "output tokens: ledger and provider agree, the cut call's included")
			require.GreaterOrEqual(t, cutAttempt.CostUSD+cutAttempt.EstCostUSD, fs.BilledUSD-billedByProvider-1e-12,
				"spent plus possibly billed covers what the provider billed for the cut call")
			require.Greater(t, cutAttempt.CostUSD, 0.0, "what arrived is counted as spent")
		})
	}
}

// A stream that stalls after its first chunks (the connection stays open)
// is cut by stream_idle_timeout long before the key's 30 s call timeout;
// its partial text is kept.
func TestStalledStreamIsCutByTheIdleTimeout(t *testing.T) {
	t.Parallel()
	stall := fakeprovider.Step{Action: fakeprovider.ActionStallStream, Chunks: 2}
	b := setup(t, fakeprovider.Scenario{NoReplay: true, RecordScripts: map[string][]fakeprovider.Step{"r001": {stall}}},
		tweaks{timeout: "30s", extraPipeline: "stream = true\nstream_idle_timeout = \"300ms\"\nambiguous_retries = 0\n"})
	recs := records(1, nil)
	b.enqueue(t, "b1", recs)
	start := time.Now()
	b.start(t)
	// A generous bound, but below the call timeout: only the idle timeout
	// can settle the batch in time.
	st := b.waitSettled(t, "b1", 20*time.Second)
	require.Less(t, time.Since(start), 30*time.Second)
	require.Equal(t, 1, st.DeadLettered)
	eventually(t, 10*time.Second, "the provider sees the client leave", func() bool { return b.fake.Stats().Hanging == 0 })
	require.Equal(t, 1, b.fake.Stats().BilledCalls)

	as := attemptsOf(t, b, "b1")
	require.Len(t, as, 1)
	require.Equal(t, ledger.AttemptPossiblyBilled, as[0].Status)
	require.NotNil(t, as[0].PartialText)
	require.Equal(t, answerOf(t, b, recs[0])[:24], *as[0].PartialText)
	require.NotNil(t, as[0].Reason)
	require.Equal(t, "stream_failed", *as[0].Reason)
}

// With output = "text" and accept_partial_min_chars, a cut stream that
// delivered enough text completes its record with that text, marked
// partial; one that delivered less is not accepted. One call each.
func TestAcceptPartialCompletesATextRecord(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true, RecordScripts: map[string][]fakeprovider.Step{
		"r001": {{Action: fakeprovider.ActionCutStream, Chunks: 3}},
		"r002": {{Action: fakeprovider.ActionCutStream, Chunks: 1}},
	}}, tweaks{output: "text", extraPipeline: "stream = true\naccept_partial_min_chars = 30\nambiguous_retries = 0\n"})
	recs := records(3, nil)
	b.enqueue(t, "b1", recs)
	b.start(t)
	st := b.waitSettled(t, "b1", 20*time.Second)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, 1, st.DeadLettered)
	require.Equal(t, 3, b.fake.Stats().Requests, "no record was sent twice")
	require.Zero(t, b.fake.Stats().DoubleBilledRecords)

	got := map[string]ledger.ResultRow{}
	for row, err := range ledger.Results(context.Background(), b.db.Pool, "b1") {
		require.NoError(t, err)
		got[row.ID] = row
	}
	require.True(t, got["r001"].Partial, "36 characters arrived: accepted, marked partial")
	var text string
	require.NoError(t, json.Unmarshal(got["r001"].Output, &text))
	require.Equal(t, answerOf(t, b, recs[0])[:36], text)
	require.Nil(t, got["r002"].Output, "12 characters: below the minimum, dead-lettered")
	require.False(t, got["r003"].Partial, "a whole answer is not partial")
	require.Equal(t, answerOf(t, b, recs[2]), mustString(t, got["r003"].Output))

	for _, a := range attemptsOf(t, b, "b1") {
		if a.RecordID == "r001" {
			require.Equal(t, ledger.AttemptPossiblyBilled, a.Status, "the provider may have generated past the cut")
		}
	}
}

func mustString(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(raw, &s))
	return s
}

// A stop that comes while streams are running lets them end the way they
// would have (River's stop waits for calls in flight): a whole stream
// completes its record, a stalled one is cut by its idle timeout and keeps
// its partial on the attempt, which is finished, not left as an intent. The
// next process resends only the cut record, and the ledger accounts for
// every bill the provider made.
func TestStopMidStreamFinishesStreamsAndKeepsThePartial(t *testing.T) {
	t.Parallel()
	stall := fakeprovider.Step{Action: fakeprovider.ActionStallStream, Chunks: 2}
	b := setup(t, fakeprovider.Scenario{NoReplay: true, GenerationTime: fakeprovider.Duration(3 * time.Second),
		RecordScripts: map[string][]fakeprovider.Step{"r001": {stall}}},
		tweaks{concurrency: 4, timeout: "20s", extraPipeline: "stream = true\nstream_idle_timeout = \"2s\"\n"})
	recs := records(3, nil)
	b.enqueue(t, "b1", recs)
	rt := b.newRuntime(t)
	require.NoError(t, rt.Start(context.Background()))
	eventually(t, 20*time.Second, "one stream stalled, two generating", func() bool {
		s := b.fake.Stats()
		return s.Hanging == 1 && s.InFlight == 3
	})

	ctx, cancel := context.WithTimeout(context.Background(), rt.StopGrace())
	defer cancel()
	require.NoError(t, rt.Stop(ctx))
	st := b.status(t, "b1")
	require.Equal(t, 2, st.Completed, "the streams that were running whole are stored")
	require.Zero(t, st.DeadLettered, "a cut stream is retried, not dead-lettered")
	as := attemptsOf(t, b, "b1")
	require.Len(t, as, 3, "one attempt per record before the restart")
	for _, a := range as {
		require.NotEqual(t, ledger.AttemptIntent, a.Status, "no attempt is left unfinished by the stop")
		if a.RecordID == "r001" {
			require.Equal(t, ledger.AttemptPossiblyBilled, a.Status)
			require.NotNil(t, a.PartialText)
			require.Equal(t, answerOf(t, b, recs[0])[:24], *a.PartialText, "two chunks arrived before the stall")
		}
	}

	b.start(t)
	st = b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 3, st.Completed)
	fs := b.fake.Stats()
	require.Equal(t, 4, fs.Requests, "only the cut record was sent again")
	require.Equal(t, 2, fs.ByRecord["r001"].Billed, "the cut stream billed what it generated, the resend its answer")
	require.Equal(t, 1, fs.ByRecord["r002"].Billed)
	require.Equal(t, 1, fs.ByRecord["r003"].Billed)
	require.GreaterOrEqual(t, st.SpendUSD+st.PossiblyBilledUSD, fs.BilledUSD-1e-9, "the ledger covers what the provider billed")
}

// A slow generation that keeps streaming (Anthropic, every chunk 250 ms
// after the last, the whole stream longer than the key's 1 s timeout) is
// not cut by the per-attempt timeout: its silence decides, not the clock
// (issue 23). One call, billed once, the record completed with the whole
// answer.
func TestSteadyStreamIsNotCutByTheCallTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true, ChunkLatency: fakeprovider.Duration(250 * time.Millisecond)},
		tweaks{vendor: "anthropic", timeout: "1s", extraPipeline: "stream = true\nstream_idle_timeout = \"900ms\"\nambiguous_retries = 0\n"})
	b.enqueue(t, "b1", records(1, nil))
	b.start(t)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 1, st.Completed, "dead letters: %+v", b.deadLetters(t, "b1"))
	stats := b.fake.Stats()
	require.Equal(t, 1, stats.Requests, "not cut, so not resent")
	require.Equal(t, 1, stats.BilledCalls)
	as := attemptsOf(t, b, "b1")
	require.Len(t, as, 1)
	require.Equal(t, ledger.AttemptOK, as[0].Status)
	require.Greater(t, as[0].FinishedAt.Sub(as[0].StartedAt), time.Second, "the stream outlived the call timeout")
}
