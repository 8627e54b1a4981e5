package worker_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/operator"
)

// gate holds every request that reaches it until opened: calls in flight a
// test can count and release.
type gate struct {
	h       http.Handler
	arrived atomic.Int32
	once    sync.Once
	open    chan struct{}
}

func newGate(h http.Handler) *gate { return &gate{h: h, open: make(chan struct{})} }

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.arrived.Add(1)
	select {
	case <-g.open:
	case <-r.Context().Done():
		return
	}
	g.h.ServeHTTP(w, r)
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// requireLedgerIsTheBill: every call the provider billed is recorded once,
// at its price, and nothing is left in flight.
func (b *testBundle) requireLedgerIsTheBill(t *testing.T) {
	t.Helper()
	b.requireBilledOnce(t)
}

// The "done when", sync side: a batch cancelled while calls are in
// flight starts no call after the cancel; the calls in flight finish and
// their answers are stored and billed once; every other record is
// dead-lettered cancelled and the batch settles.
func TestCancelBatchWithCallsInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true}, tweaks{concurrency: 4})
	g := newGate(b.fake)
	cfg, _ := b.otherEndpoint(t, g)
	const n = 30
	b.enqueue(t, "b1", records(n, nil))
	b.startWith(t, cfg, "w1")
	eventually(t, 30*time.Second, "four calls in flight", func() bool { return g.arrived.Load() == 4 })

	res, err := operator.CancelBatch(context.Background(), b.db.Pool, "b1", operator.ControlOptions{Schema: b.db.Schema})
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.GreaterOrEqual(t, res.InFlight, 4, "the calls in flight are left to finish")
	require.Equal(t, n, res.DeadLettered+res.InFlight)
	require.Equal(t, ledger.BatchCancelled, b.status(t, "b1").State)
	g.release()

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.EqualValues(t, 4, g.arrived.Load(), "no call started after the cancel")
	require.Equal(t, 4, b.fake.Stats().Requests)
	require.Equal(t, 4, st.Completed, "the answers of the calls in flight are stored")
	require.Equal(t, n-4, st.DeadLettered)
	require.Equal(t, n-4, st.Cancelled)
	for _, d := range b.deadLetters(t, "b1") {
		require.Equal(t, ledger.ReasonCancelled, d.Reason, d.RecordID)
	}
	b.requireLedgerIsTheBill(t)
}

// The "done when", batch side: a batch cancelled while its provider
// batch is open has the provider batch cancelled; the lines it ran before
// the cancel are collected, stored and billed once, the lines it never ran
// are dead-lettered cancelled and sent nowhere else.
func TestCancelBatchWithAProviderBatchOpen(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(10 * time.Hour)}}
	b, clock := setupBatch(t, sc, "batch", tweaks{vendor: "anthropic"})
	const n = 40
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	// Every line in a provider batch (under load they may form more than one).
	// A line is "submitted" from the intent row on, before the create
	// reaches the provider: wait for the provider batches themselves.
	eventually(t, 60*time.Second, "every line is in a provider batch the provider created", func() bool {
		return b.lineStates(t)["submitted"] == n && b.providerBatches(t)["intent"] == 0 && b.fake.Stats().Batches.Created > 0
	})
	created := b.fake.Stats().Batches.Created
	clock.Advance(5 * time.Hour)

	res, err := operator.CancelBatch(context.Background(), b.db.Pool, "b1", operator.ControlOptions{Schema: b.db.Schema})
	require.NoError(t, err)
	require.Len(t, res.ProviderBatches, created, "its provider batches are asked to cancel")
	require.Zero(t, res.DeadLettered, "every record's answer is on its way: none is dead-lettered before the provider says")

	st := b.waitSettled(t, "b1", 60*time.Second)
	stats := b.fake.Stats()
	require.Equal(t, created, stats.Batches.Created, "no line is sent again")
	require.Positive(t, stats.Batches.Canceled)
	require.Equal(t, stats.Batches.Succeeded, st.Completed, "every line the provider ran is stored")
	require.Equal(t, stats.Batches.Canceled, st.DeadLettered, "every line it never ran is dead-lettered")
	require.Equal(t, n, st.Completed+st.DeadLettered)
	for _, d := range b.deadLetters(t, "b1") {
		require.Equal(t, ledger.ReasonCancelled, d.Reason, d.RecordID)
	}
	b.requireLedgerIsTheBill(t)
}

// A paused batch makes no call until resumed: its jobs stay queued (parked,
// no attempt spent); resumed, it settles.
func TestPausedBatchMakesNoCallUntilResumed(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true}, tweaks{})
	ctx := context.Background()
	opts := operator.ControlOptions{Schema: b.db.Schema}
	const n = 12
	b.enqueue(t, "b1", records(n, nil))
	_, err := operator.PauseBatch(ctx, b.db.Pool, "b1", opts)
	require.NoError(t, err)
	require.Equal(t, ledger.BatchPaused, b.status(t, "b1").State)
	b.start(t)
	eventually(t, 30*time.Second, "every job ran and parked", func() bool {
		return b.countBy(t, `SELECT state::text, count(*) FROM river_job GROUP BY 1`)["scheduled"] == n
	})
	require.Zero(t, b.fake.Stats().Requests, "no call while paused")
	var attempts int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM triage_attempt`).Scan(&attempts))
	require.Zero(t, attempts)

	res, err := operator.ResumeBatch(ctx, b.db.Pool, "b1", opts)
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.Equal(t, n, res.Woken)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	require.Equal(t, n, b.fake.Stats().Requests)
	b.requireLedgerIsTheBill(t)
}

// Under `work`, a key the provider refuses as invalid is held as exhausted
// (the class stays), with an alert that says the key is invalid, not out
// of money.
func TestInvalidKeyAlertSaysTheKeyIsInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{}, tweaks{probeInterval: "1m"})
	b.opts.Getenv = func(string) string { return "sk-revoked" }
	b.enqueue(t, "b1", records(3, nil))
	b.start(t)
	eventually(t, 30*time.Second, "the key_exhausted alert", func() bool { return b.hooks.Count("key_exhausted") == 1 })
	all := b.hooks.All()
	require.Contains(t, all, "key invalid: the provider refuses the API key itself (invalid_api_key")
	require.Contains(t, all, "a top-up will not help")
	require.NotContains(t, all, "top-up resumes")
	ks, err := keys.DefaultStore(b.db.Pool).KeyStatus(context.Background(), "main")
	require.NoError(t, err)
	require.Equal(t, keys.StateOpen, ks.State, "held as exhausted: the class stays")
}
