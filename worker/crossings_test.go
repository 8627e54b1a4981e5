package worker_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/workertest"
)

// An accepted partial (a cut stream kept as the record's result) is not a
// whole answer: it is never stored in the response cache. A later batch
// with the same request calls the provider and gets the whole answer,
// never the truncated text as an unmarked cache_hit.
func TestAcceptedPartialIsNotCached(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true, RecordScripts: map[string][]fakeprovider.Step{
		"r001": {{Action: fakeprovider.ActionCutStream, Chunks: 3}},
	}}, tweaks{output: "text", extraPipeline: "stream = true\naccept_partial_min_chars = 30\nambiguous_retries = 0\ncache = true\n"})
	recs := records(2, nil)
	b.start(t)

	b.enqueue(t, "first", recs)
	st := b.waitSettled(t, "first", 20*time.Second)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, 2, b.fake.Stats().Requests)
	rows := map[string]ledger.ResultRow{}
	for row, err := range ledger.Results(context.Background(), b.db.Pool, "first") {
		require.NoError(t, err)
		rows[row.ID] = row
	}
	require.True(t, rows["r001"].Partial, "the cut stream was accepted as partial")
	require.Equal(t, 1, b.cacheRows(t), "only the whole answer is cached")

	b.enqueue(t, "second", recs)
	st = b.waitSettled(t, "second", 20*time.Second)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, 3, b.fake.Stats().Requests, "the partial's request is sent again; the whole answer comes from the cache")
	rows = map[string]ledger.ResultRow{}
	for row, err := range ledger.Results(context.Background(), b.db.Pool, "second") {
		require.NoError(t, err)
		rows[row.ID] = row
	}
	require.False(t, rows["r001"].Partial)
	var text string
	require.NoError(t, json.Unmarshal(rows["r001"].Output, &text))
	require.Equal(t, answerOf(t, b, recs[0]), text, "the whole answer, not the truncated text")
	for _, a := range attemptsOf(t, b, "second") {
		if a.RecordID == "r001" {
			require.False(t, a.Reason != nil && *a.Reason == ledger.ReasonCacheHit, "no cache hit from a partial")
		}
	}
}

// A batch job whose line holds a paid answer makes no call when it applies
// it. Run as the exhausted breaker's probe, it must not close the breaker:
// the provider was not asked, its balance is still spent. Every stored
// answer is applied while the key stays exhausted: no key_resumed, no new
// provider batch, until the balance is topped up.
func TestBatchAnswerAppliedAsTheProbeDoesNotResumeTheKey(t *testing.T) {
	t.Parallel()
	const n = 12
	// Room for about half of the lines at batch prices.
	sc := fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 6 * 7.5e-6}}
	b, clock := setupBatch(t, sc, "batch", tweaks{})
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	eventually(t, 30*time.Second, "the key trips", func() bool { return b.hooks.count("key_exhausted") >= 1 })
	// (On a loaded machine the lines may have gone out in two batches before
	// the balance ran out.)
	created := b.fake.Stats().Batches.Created
	// Every paid answer is applied, some of them by jobs the breaker
	// dispatched as its probe (the clock moves the probes along).
	eventually(t, 30*time.Second, "every paid answer applied", func() bool {
		clock.Advance(500 * time.Millisecond)
		paid := b.fake.Stats().Batches.Succeeded
		return paid > 0 && b.status(t, "b1").Completed == paid
	})
	require.Less(t, b.status(t, "b1").Completed, n)
	require.Zero(t, b.hooks.count("key_resumed"), "no probe call was made: the key is not resumed")
	require.True(t, keyOpen(t, b), "the exhausted breaker stays open")
	require.Equal(t, created, b.fake.Stats().Batches.Created, "no new batch while the key is exhausted")

	b.fake.TopUp(1)
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, n, st.Completed)
	require.Equal(t, 1, b.hooks.count("key_resumed"), "the real probe, a create, resumes the key")
	b.requireBilledOnce(t)
}

// The submitter's create is the key's probe when the breaker is due one;
// it is settled by the gate's rules. A create refused with a 4xx (the
// provider rejects the request) says nothing about the balance: the
// exhausted breaker stays open, its claim given back.
func TestBatchCreateRejectedOnTheProbeLeavesTheKeyExhausted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{
		FailValidation: &fakeprovider.BatchError{Code: "invalid_request_error", Message: "bad batch"}}}
	b, clock := setupBatch(t, sc, "batch", tweaks{vendor: "anthropic", probeInterval: "200ms"})
	store, err := keys.NewStore(b.db.Pool, keys.StoreConfig{Clock: clock})
	require.NoError(t, err)
	adm, err := store.Admit(ctx, workertest.Key, 0)
	require.NoError(t, err)
	tripped, err := store.Trip(ctx, workertest.Key, adm, "insufficient_credits", 200*time.Millisecond)
	require.NoError(t, err)
	require.True(t, tripped)

	b.enqueue(t, "b1", records(4, nil))
	b.start(t)
	// The second create follows the first one's settlement (one submitter).
	eventually(t, 30*time.Second, "two creates refused", func() bool { return b.fake.Stats().Batches.CreatesRefused >= 2 })
	st, err := store.KeyStatus(ctx, workertest.Key)
	require.NoError(t, err)
	require.NotEqual(t, keys.StateClosed, st.State, "a refused create is no proof of a balance")
	require.Equal(t, "insufficient_credits", st.Reason)
}

// An exhausted answer to the storm breaker's probe (the submitter's
// create) ends the storm (the provider answered) and trips the exhausted
// breaker, as the gate settles a job's probe: the storm breaker is not
// left half-open until the claim's lease runs out.
func TestBatchCreateExhaustedOnAStormProbeClosesTheStorm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}}
	b, clock := setupBatch(t, sc, "batch", tweaks{vendor: "anthropic", extraKey: "storm_probe_min = \"200ms\"\n"})
	store, err := keys.NewStore(b.db.Pool, keys.StoreConfig{Clock: clock})
	require.NoError(t, err)
	adm, err := store.Admit(ctx, workertest.Key, 0)
	require.NoError(t, err)
	rep, err := store.StormFailure(ctx, workertest.Key, adm, true, "server_error", 200*time.Millisecond)
	require.NoError(t, err)
	require.True(t, rep.Opened)

	b.enqueue(t, "b1", records(4, nil))
	b.start(t)
	var st *keys.KeyStatus
	eventually(t, 30*time.Second, "the exhausted breaker trips", func() bool {
		st, err = store.KeyStatus(ctx, workertest.Key)
		require.NoError(t, err)
		return st.State != keys.StateClosed
	})
	require.Equal(t, keys.StateClosed, st.Storm.State, "the provider answered: the storm is over")
	require.Equal(t, 1, b.fake.Stats().Batches.CreatesRefused)
	eventually(t, 10*time.Second, "key_exhausted raised", func() bool { return b.hooks.count("key_exhausted") == 1 })
}

// The storm variant: a batch job applying its stored answer as the storm
// breaker's probe made no call, so the storm is not over: the breaker stays
// open (parked synchronous jobs are not sent back into an outage) while
// every stored answer is still applied.
func TestBatchAnswerAppliedAsTheStormProbeDoesNotEndTheStorm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 4
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)}}
	b, clock := setupBatch(t, sc, "batch", tweaks{extraKey: "storm_probe_min = \"200ms\"\n"})
	// One provider batch, however slowly the jobs write their lines: a
	// line left to a second batch (a loaded machine leaves 200 ms between
	// two jobs' lines) goes into a batch created after the clock jump,
	// which never finishes ("batch b1 settles" timed out), or into a
	// second create where the test counts one.
	b.oneGather(n, 5*time.Second)
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	eventually(t, 30*time.Second, "the provider batch is created, with every line", func() bool {
		return b.fake.Stats().Batches.Created == 1 && b.lineStates(t)["submitted"] == n
	})

	store, err := keys.NewStore(b.db.Pool, keys.StoreConfig{Clock: clock})
	require.NoError(t, err)
	adm, err := store.Admit(ctx, workertest.Key, 0)
	require.NoError(t, err)
	rep, err := store.StormFailure(ctx, workertest.Key, adm, true, "server_error", 200*time.Millisecond)
	require.NoError(t, err)
	require.True(t, rep.Opened)

	clock.Advance(2 * time.Hour) // the lines are answered
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed, "every stored answer is applied")
	ks, err := store.KeyStatus(ctx, workertest.Key)
	require.NoError(t, err)
	require.NotEqual(t, keys.StateClosed, ks.Storm.State, "no call was made: the storm is not over")
	require.Equal(t, 1, b.fake.Stats().Batches.Created)
	b.requireBilledOnce(t)
}

// heldCreate holds the first batch create until release is closed: the
// lines written meanwhile wait, pending, behind it.
type heldCreate struct {
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func (h *heldCreate) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/batches") {
		first := false
		h.once.Do(func() { first = true })
		if first {
			close(h.held)
			select {
			case <-h.release:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A create refused for the balance trips the key's exhausted breaker, and
// no further create is sent until its probe, however many lines wait for
// a provider batch: the round that sent the refused create must not form
// the next batch with the admission it had before the trip.
func TestCreateRefusedForTheBalanceEndsTheRoundsCreates(t *testing.T) {
	t.Parallel()
	const n, perBatch = 6, 2
	sc := fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}}
	b, _ := setupBatch(t, sc, "batch", tweaks{vendor: "anthropic", probeInterval: "1h"})
	b.opts.Batch.MaxLines = perBatch // three provider batches' worth of lines
	b.opts.MaxAge = 10 * time.Second // then the records end (snoozed_out), their lines taken back
	hold := &heldCreate{held: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-hold.release:
		default:
			close(hold.release)
		}
	})
	b.opts.HTTPClient = &http.Client{Transport: hold}
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	waitClosed(t, hold.held, "the first create")
	eventually(t, 30*time.Second, "every line is written, the others pending behind the first batch", func() bool {
		ls := b.lineStates(t)
		return ls["submitted"]+ls["pending"] == n && ls["pending"] >= perBatch
	})
	close(hold.release)
	eventually(t, 30*time.Second, "the key trips", func() bool { return b.hooks.count("key_exhausted") >= 1 })
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, n, st.DeadLettered)
	stats := b.fake.Stats()
	require.Equal(t, 1, stats.Batches.CreatesRefused, "one create refused for the balance, then none until the probe (an hour)")
	require.Zero(t, stats.BilledCalls)
	require.Equal(t, map[string]int{"abandoned": 1}, b.providerBatches(t))
}
