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
	"github.com/triage-dev/triage/worker/workertest"
)

// fallbackKey writes a second key, served by its own fake provider at
// baseURL, and its model "fb-model" with the given context window, as
// lines that end the pipeline table.
func fallbackKey(baseURL string, contextTokens int, pipeline string) string {
	return pipeline + fmt.Sprintf(`
[[keys]]
name = "fb"
vendor = "openai"
base_url = %q
api_key_env = %q
concurrency = 4
timeout = "5s"
probe_interval = "500ms"

[[models]]
name = "fb-model"
key = "fb"
context_tokens = %d
max_output_tokens = 4096
json_mode = true
input_usd_per_mtok = 0.30
output_usd_per_mtok = 1.20
`, baseURL, workertest.APIKeyEnv, contextTokens)
}

// The primary key's balance runs out mid-batch: the batch completes on the
// fallback, the exhausted key gets only its probes, and the records too long
// for the fallback's context window wait and complete on the primary after
// a top-up.
func TestFallbackWhenPrimaryExhausted(t *testing.T) {
	t.Parallel()
	const n, long = 60, 8 // the last 8 records are too long for the fallback
	fb, fbURL := workertest.Provider(t, fakeprovider.Scenario{APIKey: workertest.APIKey, NoReplay: true})
	isLong := func(i int) bool { return i >= n-long }
	recs := records(n, func(i int) string {
		if isLong(i) {
			return `,"text":"` + strings.Repeat("lorem ipsum ", 250) + `"`
		}
		return ""
	})
	// A short record's request is about 30 prompt tokens + max_tokens 1024;
	// a long one's about 800 more. The fallback's window fits the first only.
	b := setup(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0.0002}, NoReplay: true},
		tweaks{concurrency: 4, probeInterval: "400ms",
			extraPipeline: fallbackKey(fbURL, 1300, "fallback = [\"fb-model\"]\nfallback_grace = \"300ms\"\n")})
	b.enqueue(t, "b1", recs)
	b.start(t)

	eventually(t, 20*time.Second, "the key_exhausted alert", func() bool { return b.hooks.count("key_exhausted") == 1 })
	exhaustedAt := time.Now()
	// Everything the fallback can serve completes while the primary stays
	// exhausted; only long records are left.
	eventually(t, 30*time.Second, "the short records complete on the fallback", func() bool {
		return b.status(t, "b1").Completed >= n-long
	})
	pending := map[string]bool{}
	for row, err := range ledger.Results(context.Background(), b.db.Pool, "b1") {
		require.NoError(t, err)
		if row.Output == nil {
			pending[row.ID] = true
		}
	}
	require.NotEmpty(t, pending, "the balance ran out before the long records")
	for id := range pending {
		var i int
		fmt.Sscanf(id, "r%03d", &i)
		require.True(t, isLong(i-1), "only records the fallback cannot fit wait: %s", id)
	}
	for id := range fb.Stats().ByRecord {
		var i int
		fmt.Sscanf(id, "r%03d", &i)
		require.False(t, isLong(i-1), "a record too long for the fallback was sent to it: %s", id)
	}
	// The exhausted key got the calls in flight when it tripped plus one
	// probe per interval, nothing more.
	intervals := int(time.Since(exhaustedAt)/(400*time.Millisecond)) + 2
	require.LessOrEqual(t, b.fake.Stats().RequestsWhileExhausted, 4+intervals)
	require.Zero(t, b.status(t, "b1").DeadLettered)

	b.fake.TopUp(1)
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, n, st.Completed)
	require.Zero(t, st.DeadLettered)
	require.Zero(t, b.fake.Stats().DoubleBilledRecords)
	require.Zero(t, fb.Stats().DoubleBilledRecords)
	require.Positive(t, st.Fallback)
	require.Equal(t, n, st.Models["fake-model"]+st.Models["fb-model"], "%v", st.Models)
	require.Equal(t, st.Fallback, st.Models["fb-model"], "every record moved was answered by the fallback")
	for row, err := range ledger.Results(context.Background(), b.db.Pool, "b1") {
		require.NoError(t, err)
		if pending[row.ID] {
			require.Equal(t, "fake-model", row.Model, "a long record completes on the primary: %s", row.ID)
		}
	}
	// Fallback calls are priced at the fallback model's prices, on its key.
	var fbCalls int
	var fbCost float64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*), coalesce(sum(cost_usd), 0)::float8 FROM triage_attempt WHERE key = 'fb' AND model = 'fb-model' AND status = 'ok'`).Scan(&fbCalls, &fbCost))
	require.Equal(t, st.Models["fb-model"], fbCalls)
	require.Positive(t, fbCost)
	usage, err := ledger.UsageByModel(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, usage, 2)
	require.Equal(t, "fake-model", usage[0].Model)
	require.Equal(t, "fb-model", usage[1].Model)
	require.Equal(t, "fb", usage[1].Key)
	require.Equal(t, n, usage[0].Answered+usage[1].Answered)
	require.InDelta(t, fbCost, usage[1].SpendUSD, 1e-12)
}

// A record whose transient attempts on the primary are spent moves to the
// fallback and completes there; a rejected record never falls back.
func TestFallbackAfterTransientAttemptsSpentNotAfterRejection(t *testing.T) {
	t.Parallel()
	fb, fbURL := workertest.Provider(t, fakeprovider.Scenario{APIKey: workertest.APIKey, NoReplay: true})
	over := act(fakeprovider.ActionOverloaded)
	b := setup(t, fakeprovider.Scenario{NoReplay: true, RecordScripts: map[string][]fakeprovider.Step{
		"r001": steps(over, over, over),
		"r002": steps(act(fakeprovider.ActionPolicy)),
	}}, tweaks{maxAttempts: 2, extraPipeline: fallbackKey(fbURL, 0, "fallback = [\"fb-model\"]\n")})
	b.enqueue(t, "b1", records(4, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 3, st.Completed)
	require.Equal(t, 1, st.DeadLettered)
	require.Equal(t, 2, b.fake.Stats().ByRecord["r001"].Requests, "max_attempts 2 on the primary")
	require.Equal(t, 1, b.fake.Stats().ByRecord["r002"].Requests, "rejected: one call")
	require.Equal(t, 1, fb.Stats().Requests, "only the record whose attempts were spent went to the fallback")
	require.Equal(t, 1, fb.Stats().ByRecord["r001"].Requests)
	require.Equal(t, map[string]int{"fake-model": 2, "fb-model": 1}, st.Models)
	require.Equal(t, 1, st.Fallback)
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Equal(t, "r002", dls[0].RecordID)
	require.Equal(t, "rejected", dls[0].Class)
}

// fallback_max_share bounds how many of a batch's records move: the rest
// end as they would have without a fallback.
func TestFallbackMaxShareBoundsTheMoves(t *testing.T) {
	t.Parallel()
	fb, fbURL := workertest.Provider(t, fakeprovider.Scenario{APIKey: workertest.APIKey, NoReplay: true})
	const n = 10
	b := setup(t, fakeprovider.Scenario{NoReplay: true, Random: []fakeprovider.RandomFault{{P: 1, Action: fakeprovider.ActionOverloaded}}},
		tweaks{maxAttempts: 1, extraKey: "storm_failures = 0\nstorm_share = 0\n",
			extraPipeline: fallbackKey(fbURL, 0, "fallback = [\"fb-model\"]\nfallback_max_share = 0.3\n")})
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 3, st.Completed, "0.3 of 10 records")
	require.Equal(t, 3, st.Fallback)
	require.Equal(t, n-3, st.DeadLettered)
	require.Equal(t, 3, fb.Stats().Requests)
	require.Equal(t, n, b.fake.Stats().Requests, "one call each on the primary (max_attempts 1)")
	for _, d := range b.deadLetters(t, "b1") {
		require.Equal(t, "retries_exhausted", d.Reason)
	}
}

// While the primary key is exhausted, fallback_max_share bounds the jobs
// the mover sends elsewhere; the rest wait on the primary untouched and
// complete there after a top-up.
func TestFallbackMaxShareWhileExhausted(t *testing.T) {
	t.Parallel()
	fb, fbURL := workertest.Provider(t, fakeprovider.Scenario{APIKey: workertest.APIKey, NoReplay: true})
	const n = 10
	b := setup(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}, NoReplay: true},
		tweaks{concurrency: 1, probeInterval: "400ms",
			extraPipeline: fallbackKey(fbURL, 0, "fallback = [\"fb-model\"]\nfallback_max_share = 0.5\nfallback_grace = \"100ms\"\n")})
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)

	eventually(t, 20*time.Second, "half the batch completes on the fallback", func() bool { return b.status(t, "b1").Completed == n/2 })
	st := b.status(t, "b1")
	require.Equal(t, n/2, st.Fallback)
	require.Equal(t, n/2, fb.Stats().Requests, "no more than the share went to the fallback")
	require.Zero(t, st.DeadLettered)
	require.Zero(t, b.fake.Stats().ByStatus[200], "nothing answered on the exhausted primary")

	b.fake.TopUp(1)
	st = b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	require.Equal(t, map[string]int{"fake-model": n / 2, "fb-model": n / 2}, st.Models)
	require.Equal(t, n/2, fb.Stats().Requests)
}

// A provider storm on the primary: once the storm breaker has been open
// past the grace, the queued jobs move to the fallback and the batch
// completes there, while the primary gets only its probes.
func TestFallbackWhenStormOpen(t *testing.T) {
	t.Parallel()
	fb, fbURL := workertest.Provider(t, fakeprovider.Scenario{APIKey: workertest.APIKey, NoReplay: true})
	const n = 40
	b := setup(t, fakeprovider.Scenario{NoReplay: true, Random: []fakeprovider.RandomFault{{P: 1, Action: fakeprovider.ActionOverloaded}}},
		tweaks{concurrency: 2, maxAttempts: 6,
			extraPipeline: fallbackKey(fbURL, 0, "fallback = [\"fb-model\"]\nfallback_grace = \"200ms\"\n")})
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, n, st.Completed)
	require.Equal(t, n, st.Models["fb-model"])
	require.Equal(t, n, fb.Stats().Requests)
	// The storm opened after a few failures in a row; then only probes.
	require.Less(t, b.fake.Stats().Requests, n/2, "the primary was not hammered through the storm")
}
