package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/submitter"
	"github.com/triage-dev/triage/worker/workertest"
)

// testClock is the system clock moved forward by Advance: the fake
// provider's batches and the worker's deadlines read it, so a test skips
// hours of batch latency without waiting for them.
type testClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// batchTuning makes the submitter's rounds and polls quick.
var batchTuning = submitter.Tuning{Tick: 20 * time.Millisecond, Gather: 200 * time.Millisecond,
	PollMin: 20 * time.Millisecond, PollMax: 100 * time.Millisecond, Lease: 2 * time.Second}

// setupBatch is setup for a pipeline with the given mode, with the fake's
// and the worker's clock the same testClock, replay off.
func setupBatch(t *testing.T, sc fakeprovider.Scenario, mode string, tw tweaks) (*testBundle, *testClock) {
	t.Helper()
	clock := &testClock{}
	sc.Now = clock.Now
	sc.NoReplay = true
	tw.extraPipeline = "mode = \"" + mode + "\"\n" + tw.extraPipeline
	b := setup(t, sc, tw)
	b.opts.Clock = clock
	b.opts.Batch = batchTuning
	return b, clock
}

// oneGather makes the first n lines one provider batch on any machine: it
// forms once n lines are pending (Tuning.MaxLines), not when no line
// arrived for the 200 ms gather window, which a loaded machine leaves
// between two jobs' lines often enough to split them over two provider
// batches (a test expecting one: expected 1, got 2). Lines pending again
// later (a validation failure's others, a cancelled batch's) form after
// gather, a few seconds: long against the gaps between jobs' lines, short
// enough that no line waits out the test.
func (b *testBundle) oneGather(n int, gather time.Duration) {
	b.opts.Batch.MaxLines = n
	b.opts.Batch.Gather = gather
}

// startStalled starts a first process whose requests go through stall,
// with n records of batch b1 that form one provider batch, and waits (30 s
// at most) until stall has caught the request the test stalls, which
// closes held; what names that request when it never comes. The stall,
// the lease lost during it and a second process are the test's (the
// lease, stray and split tests).
func (b *testBundle) startStalled(t testing.TB, stall http.RoundTripper, held <-chan struct{}, n int, what string) {
	t.Helper()
	b.opts.HTTPClient = &http.Client{Transport: stall}
	b.oneGather(n, 5*time.Second)
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	waitClosed(t, held, what)
}

// waitClosed waits (30 s at most) until ch is closed, else fails the
// test saying what never happened.
func waitClosed(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never happened", what)
	}
}

// lineStates counts the batch lines by state.
func (b *testBundle) lineStates(t testing.TB) map[string]int {
	t.Helper()
	return b.countBy(t, "SELECT state, count(*) FROM triage_provider_batch_line GROUP BY 1")
}

// oneBatch makes the first n lines the test's jobs write one provider
// batch on any machine, as the only way they are sent: the submitter forms
// it when the n-th line is pending (Tuning.MaxLines), never before (the
// gather window is an hour, so a loaded machine that writes the lines
// seconds apart does not send the first ones alone). Fewer lines pending
// later (a validation failure's others) wait until sendTogether ages them.
// Do not age the first n lines too: the aging and the submitter's forming
// would then race for the same pending lines, the submitter skips the ones
// the aging holds locked (FOR UPDATE SKIP LOCKED) and sends them in a
// second provider batch (a test expecting one: expected 1, actual 2).
func (b *testBundle) oneBatch(n int) {
	b.opts.Batch.MaxLines = n
	b.opts.Batch.Gather = time.Hour
}

// sendTogether makes the n lines the test's jobs write go in one provider
// batch: with b.opts.Batch.Gather set to an hour before start, it waits
// until n lines wait, then ages them so the submitter sends them at once.
// (The 200 ms gather of batchTuning splits the lines of a test over several
// provider batches when a loaded machine runs the jobs slowly.) The
// submitter must not form them by itself meanwhile (MaxLines above n, or
// unset): see oneBatch.
func (b *testBundle) sendTogether(t testing.TB, n int) {
	t.Helper()
	require.True(t, b.opts.Batch.MaxLines == 0 || b.opts.Batch.MaxLines > n,
		"sendTogether(%d) with MaxLines %d: the submitter forms them by itself, racing the aging", n, b.opts.Batch.MaxLines)
	eventually(t, 30*time.Second, fmt.Sprintf("%d lines wait for a provider batch", n), func() bool {
		return b.lineStates(t)["pending"] == n
	})
	_, err := b.db.Pool.Exec(context.Background(),
		`UPDATE triage_provider_batch_line SET pending_since = now() - interval '1 day' WHERE state = 'pending'`)
	require.NoError(t, err)
}

// ledgerBill sums the ledger: cost, what it would have cost sync, attempts
// by mode.
func (b *testBundle) ledgerBill(t testing.TB) (costUSD, syncUSD float64, byMode map[string]int) {
	t.Helper()
	byMode = map[string]int{}
	rows, err := b.db.Pool.Query(context.Background(), `SELECT mode, count(*), coalesce(sum(cost_usd), 0)::float8,
		coalesce(sum(sync_cost_usd), 0)::float8 FROM triage_attempt GROUP BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var (
			mode    string
			n       int
			c, sync float64
		)
		require.NoError(t, rows.Scan(&mode, &n, &c, &sync))
		byMode[mode] = n
		costUSD += c
		syncUSD += sync
	}
	require.NoError(t, rows.Err())
	return costUSD, syncUSD, byMode
}

func poisoned(every int) func(i int) string {
	return func(i int) string {
		if i%every == 0 {
			return `,"note":"POISON"`
		}
		return ""
	}
}

// The first "done when": a 2,000-record batch-mode run with 10 %
// poisoned records completes every good record through the Batch API,
// dead-letters exactly the poisoned ones with the reason a synchronous call
// gets, bills at batch prices, and the ledger matches the provider's bill
// exactly.
func TestBatchModeRunBillsAtBatchPricesAndDeadLettersThePoisoned(t *testing.T) {
	t.Parallel()
	b, _ := setupBatch(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, "batch", tweaks{concurrency: 8})
	const n = 2000
	b.enqueue(t, "b1", records(n, poisoned(10)))
	b.start(t)

	// 2,000 records under -race take about 30 s on a quiet 2-core machine
	// and over two minutes at load average 30.
	st := b.waitSettled(t, "b1", 5*time.Minute)
	require.Equal(t, n-n/10, st.Completed, "every good record completes")
	require.Equal(t, n/10, st.DeadLettered)
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, n/10)
	for _, d := range dls {
		var i int
		_, err := fmt.Sscanf(d.RecordID, "r%d", &i)
		require.NoError(t, err)
		require.Zero(t, (i-1)%10, "only poisoned records are dead-lettered: %s", d.RecordID)
		require.Equal(t, "rejected", d.Class)
		require.Equal(t, 400, d.HTTPStatus)
		require.NotEmpty(t, d.Reason)
	}
	// The same fault on a synchronous call gets the same reason.
	sync := setup(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, tweaks{})
	sync.enqueue(t, "s1", records(1, poisoned(10)))
	sync.start(t)
	sync.waitSettled(t, "s1", 30*time.Second)
	syncDL := sync.deadLetters(t, "s1")
	require.Len(t, syncDL, 1)
	require.Equal(t, syncDL[0].Reason, dls[0].Reason, "a batch line is classified as the same call made synchronously")
	require.Equal(t, syncDL[0].VendorCode, dls[0].VendorCode)

	stats := b.fake.Stats()
	require.Zero(t, stats.Requests-stats.Batches.Succeeded-stats.Batches.Errored, "no synchronous call: every request was a batch line")
	require.Equal(t, n, stats.Batches.Lines, "each record sent in one batch line, once")
	require.Zero(t, stats.DoubleBilledRecords, "nothing billed twice")
	costUSD, syncUSD, byMode := b.ledgerBill(t)
	require.Equal(t, map[string]int{"batch": n}, byMode, "one batch attempt per record")
	require.InDelta(t, stats.BilledUSD, costUSD, 1e-9, "the ledger is the provider's bill")
	require.InDelta(t, stats.Batches.BilledUSD, stats.BilledUSD, 1e-12, "all of it at batch prices")
	require.InDelta(t, 2*costUSD, syncUSD, 1e-9, "half of what the same tokens cost synchronously")
	require.Equal(t, map[string]int{"applied": n}, b.lineStates(t))
	var open int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM triage_attempt WHERE status IN ('intent', 'possibly_billed')`).Scan(&open))
	require.Zero(t, open, "every attempt settled")
}

// startProcess runs the bundle's configuration in a worker process of its
// own (the test binary re-executed), to be killed with SIGKILL.
func (b *testBundle) startProcess(t *testing.T) *exec.Cmd {
	t.Helper()
	spec, err := json.Marshal(helperSpec{DatabaseURL: b.db.URL, ConfigTOML: b.tomlText, Batch: b.opts.Batch})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// providerBatches counts triage_provider_batch rows by state.
func (b *testBundle) providerBatches(t testing.TB) map[string]int {
	t.Helper()
	return b.countBy(t, "SELECT state, count(*) FROM triage_provider_batch GROUP BY 1")
}

// batchSnapshot is lineStates and providerBatches read in one statement,
// so one snapshot: read in two, a provider batch formed between the reads
// shows its lines submitted but not its intent row (a test then jumps the
// clock while that batch's create is still to be sent).
func (b *testBundle) batchSnapshot(t testing.TB) (lines, batches map[string]int) {
	t.Helper()
	all := b.countBy(t, `SELECT 'line:' || state, count(*) FROM triage_provider_batch_line GROUP BY state
		UNION ALL SELECT 'batch:' || state, count(*) FROM triage_provider_batch GROUP BY state`)
	lines, batches = map[string]int{}, map[string]int{}
	for k, n := range all {
		if s, ok := strings.CutPrefix(k, "line:"); ok {
			lines[s] = n
		} else {
			batches[strings.TrimPrefix(k, "batch:")] = n
		}
	}
	return lines, batches
}

// requireBilledOnce checks the money: nothing billed twice, and the
// ledger is exactly the provider's bill.
func (b *testBundle) requireBilledOnce(t *testing.T) {
	t.Helper()
	stats := b.fake.Stats()
	require.Zero(t, stats.DoubleBilledRecords, "nothing billed twice")
	for id, r := range stats.ByRecord {
		require.LessOrEqual(t, r.Billed, 1, "record %s billed %d times", id, r.Billed)
	}
	costUSD, _, _ := b.ledgerBill(t)
	require.InDelta(t, stats.BilledUSD, costUSD, 1e-9, "the ledger is the provider's bill")
	var open int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM triage_attempt WHERE status IN ('intent', 'possibly_billed')`).Scan(&open))
	require.Zero(t, open, "every attempt settled")
}

// The second "done when": a worker killed (SIGKILL) after it
// submitted a provider batch and before the results arrived. The next
// process resumes polling that same batch: nothing is submitted twice,
// nothing billed twice.
func TestBatchModeSurvivesSIGKILLAfterSubmit(t *testing.T) {
	t.Parallel()
	b, clock := setupBatch(t, fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)}}, "batch", tweaks{})
	const n = 60
	b.oneGather(n, 5*time.Second)
	b.enqueue(t, "b1", records(n, nil))
	cmd := b.startProcess(t)
	eventually(t, 30*time.Second, "the worker process submitted its provider batch", func() bool {
		return b.providerBatches(t)["submitted"] == 1 && b.fake.Stats().Batches.Created == 1
	})
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Zero(t, b.status(t, "b1").Completed, "killed before any result")
	require.Equal(t, n, b.fake.Stats().Batches.Lines)

	// The batch finishes at the provider while no worker runs.
	clock.Advance(2 * time.Hour)
	b.opts.RescueAfter = 3 * time.Second
	b.opts.JobMargin = time.Second
	b.start(t)
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, n, st.Completed)
	stats := b.fake.Stats()
	require.Equal(t, 1, stats.Batches.Created, "the restart polled the same provider batch: nothing submitted twice")
	require.Equal(t, n, stats.Batches.Lines)
	require.Equal(t, n, stats.Batches.Succeeded)
	b.requireBilledOnce(t)
	require.Equal(t, map[string]int{"collected": 1}, b.providerBatches(t))
}

// setDeadline is what `triage run --deadline` writes.
func (b *testBundle) setDeadline(t testing.TB, batch string, at time.Time) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), `UPDATE triage_batch SET deadline = $2 WHERE id = $1`, batch, at)
	require.NoError(t, err)
}

// The third "done when": a provider batch that expires with 30 %
// of its lines unfinished. Those lines were not billed; they go into the
// next provider batch and every record completes, each billed once.
func TestBatchModeExpiredLinesAreResubmitted(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour), ExpireShare: 0.3}}
	b, clock := setupBatch(t, sc, "batch", tweaks{})
	const n = 100
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	created := b.allLinesSubmitted(t, n)
	// Later batches finish whole: the next one gets the expired lines.
	sc.Batch.ExpireShare = 0
	sc.Now = clock.Now
	sc.APIKey, sc.NoReplay = workertest.APIKey, true
	require.NoError(t, b.fake.SetScenario(sc))
	clock.Advance(25 * time.Hour)
	// Under load the 30 expired lines may gather into more than one
	// provider batch: wait until every one of them is in a batch the
	// provider created, so the next hour's advance finishes them all.
	// Every first batch must be collected first: one still to be polled
	// holds its expired lines as submitted, and they would go into a batch
	// created after the next advance, which never finishes.
	eventually(t, 30*time.Second, "the expired lines are in provider batches again", func() bool {
		ls, pb := b.batchSnapshot(t)
		return pb["collected"] == created && ls["pending"] == 0 && ls["not_run"] == 0 && pb["intent"] == 0 &&
			pb["uploaded"] == 0 && b.fake.Stats().Batches.Created > created
	})
	clock.Advance(2 * time.Hour)
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, n, st.Completed, "every record completes")
	stats := b.fake.Stats()
	// 30 % of each first provider batch, rounded per batch.
	require.InDelta(t, 30, stats.Batches.Expired, float64(created-1), "30 %% of the first lines expired")
	require.Equal(t, n+stats.Batches.Expired, stats.Batches.Lines, "only the expired lines were sent again")
	require.Equal(t, n, stats.Batches.Succeeded)
	b.requireBilledOnce(t)
	_, _, byMode := b.ledgerBill(t)
	require.Equal(t, map[string]int{"batch": n}, byMode, "an expired line costs no attempt: its intent went into the next batch")
}

// The same expiry in mode "auto" with the deadline near by then: the
// expired lines are sent synchronously (same idempotency key), not in a
// new batch.
func TestAutoModeExpiredLinesGoSyncNearTheDeadline(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour), ExpireShare: 0.3}}
	b, clock := setupBatch(t, sc, "auto", tweaks{})
	const n = 100
	b.enqueue(t, "b1", records(n, nil))
	deadline := clock.Now().Add(26 * time.Hour)
	b.setDeadline(t, "b1", deadline)
	b.start(t)
	created := b.allLinesSubmitted(t, n)
	clock.Advance(25 * time.Hour) // expired; the deadline is an hour away, within the 3 h margin
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, n, st.Completed, "every record completes")
	require.True(t, clock.Now().Before(deadline), "before the deadline")
	stats := b.fake.Stats()
	require.Equal(t, created, stats.Batches.Created, "no new provider batch near the deadline")
	// 30 % of each provider batch, rounded per batch.
	require.InDelta(t, 30, stats.Batches.Expired, float64(created-1))
	require.Equal(t, stats.Batches.Expired, stats.Requests-stats.Batches.Succeeded, "the expired lines went synchronously")
	b.requireBilledOnce(t)
	costUSD, syncUSD, byMode := b.ledgerBill(t)
	require.Equal(t, n-stats.Batches.Expired, byMode["batch"]-notRun(t, b), "the lines not expired were answered in the batch")
	require.Positive(t, costUSD)
	require.Positive(t, syncUSD)
}

// notRun counts batch attempts closed as not run (a line taken back to go
// synchronously).
func notRun(t *testing.T, b *testBundle) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM triage_attempt WHERE mode = 'batch' AND reason = 'batch_not_run'`).Scan(&n))
	return n
}

// The fourth "done when": in auto mode with a deadline the
// scripted batch latency would miss, the open provider batch is cancelled
// once the deadline is within the margin; what it answered is used, the
// remainder goes synchronously, and the batch completes before the
// deadline.
func TestAutoModeMissingTheDeadlineGoesSync(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(10 * time.Hour)}}
	b, clock := setupBatch(t, sc, "auto", tweaks{})
	const n = 100
	b.oneGather(n, 5*time.Second)
	b.enqueue(t, "b1", records(n, nil))
	deadline := clock.Now().Add(6 * time.Hour)
	b.setDeadline(t, "b1", deadline)
	b.start(t)
	eventually(t, 30*time.Second, "the provider batch is submitted", func() bool { return b.providerBatches(t)["submitted"] == 1 })
	clock.Advance(4 * time.Hour) // 40 % done; the deadline is 2 h away, within the margin
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, n, st.Completed, "every record completes")
	require.True(t, clock.Now().Before(deadline), "before the deadline")
	stats := b.fake.Stats()
	require.Equal(t, 1, stats.Batches.Created)
	require.Positive(t, stats.Batches.Canceled, "the provider batch was cancelled")
	require.Positive(t, stats.Batches.Succeeded, "what it answered before the cancel is used")
	require.Equal(t, n, stats.Batches.Succeeded+stats.Batches.Canceled)
	require.Equal(t, stats.Batches.Canceled, stats.Requests-stats.Batches.Succeeded, "the canceled lines went synchronously")
	b.requireBilledOnce(t)
}

// lossyCreate loses the answer of the nth batch create (1-based; 0: the
// first), as a connection reset after the request went out would: the
// provider batch exists, the worker does not know its id. afterLoss, if
// set, runs once the answer is lost, before the worker hears of it.
type lossyCreate struct {
	mu        sync.Mutex
	nth, seen int
	lost      bool
	afterLoss func(r *http.Request) error
}

func (l *lossyCreate) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/batches") {
		return res, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen++
	if l.seen != max(l.nth, 1) {
		return res, nil
	}
	l.lost = true
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	if l.afterLoss != nil {
		if err := l.afterLoss(r); err != nil {
			return nil, err
		}
	}
	return nil, io.ErrUnexpectedEOF
}

// hasLost says whether the create's answer was lost yet.
func (l *lossyCreate) hasLost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// A create whose answer was lost leaves its intent row behind: the
// submitter finds the provider batch (OpenAI by the row's tag in its metadata,
// Anthropic by its custom_ids) instead of creating a second one.
func TestBatchIntentRowIsFoundNotResubmitted(t *testing.T) {
	t.Parallel()
	for _, vendor := range []string{"openai", "anthropic"} {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			b, _ := setupBatch(t, fakeprovider.Scenario{}, "batch", tweaks{vendor: vendor})
			lossy := &lossyCreate{}
			b.opts.HTTPClient = &http.Client{Transport: lossy}
			const n = 20
			b.oneBatch(n)
			b.enqueue(t, "b1", records(n, nil))
			b.start(t)
			st := b.waitSettled(t, "b1", 90*time.Second)
			require.Equal(t, n, st.Completed)
			require.True(t, lossy.hasLost(), "the create's answer was lost")
			stats := b.fake.Stats()
			require.Equal(t, 1, stats.Batches.Created, "the batch was found, not created again")
			require.Equal(t, n, stats.Batches.Lines)
			b.requireBilledOnce(t)
		})
	}
}

// An OpenAI batch that fails validation naming one line: that record is
// dead-lettered as batch_validation:<code> (rejected: triage rendered a line
// the API will never take); the other lines go into a new batch.
func TestBatchValidationFailureDeadLettersTheNamedLine(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{ValidateFor: fakeprovider.Duration(time.Hour),
		FailValidation: &fakeprovider.BatchError{Code: "invalid_json_line", Line: 2, Message: "This line is not parseable as valid JSON."}}}
	b, clock := setupBatch(t, sc, "batch", tweaks{})
	// The first provider batch holds every line (a 200 ms gather splits
	// them on a loaded machine); the others are sent when the test ages
	// them.
	const n = 10
	b.oneBatch(n)
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	eventually(t, 30*time.Second, "the provider batch is submitted", func() bool { return b.providerBatches(t)["submitted"] == 1 })
	// The next batch validates.
	require.NoError(t, b.fake.SetScenario(fakeprovider.Scenario{APIKey: workertest.APIKey, NoReplay: true, Now: clock.Now}))
	clock.Advance(2 * time.Hour)
	b.sendTogether(t, n-1)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n-1, st.Completed)
	require.Equal(t, 1, st.DeadLettered)
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Equal(t, "rejected", dls[0].Class)
	require.Equal(t, "batch_validation:invalid_json_line", dls[0].Reason)
	require.Equal(t, "invalid_json_line", dls[0].VendorCode, "the vendor's code, as for a call")
	require.Contains(t, dls[0].ErrorExcerpt, "not parseable")
	stats := b.fake.Stats()
	require.Equal(t, 1, stats.Batches.FailedValidation)
	require.Equal(t, 2, stats.Batches.Created, "the other lines went into a new batch")
	require.Equal(t, n-1, stats.Batches.Succeeded)
	b.requireBilledOnce(t)
}

// cancel_requested (what `triage batch cancel` sets) makes the submitter
// cancel the provider batch: what ran before the cancel is used, the
// canceled lines are requeued into a new batch and every record completes,
// each billed once.
func TestBatchCancelRequestedCancelsAndRequeues(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(10 * time.Hour)}}
	b, clock := setupBatch(t, sc, "batch", tweaks{vendor: "anthropic"})
	const n = 40
	b.oneGather(n, 2*time.Second)
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	eventually(t, 30*time.Second, "the provider batch is submitted", func() bool { return b.providerBatches(t)["submitted"] == 1 })
	clock.Advance(5 * time.Hour)
	_, err := b.db.Pool.Exec(context.Background(), `UPDATE triage_provider_batch SET cancel_requested = true WHERE state = 'submitted'`)
	require.NoError(t, err)
	eventually(t, 30*time.Second, "cancelled, and the canceled lines in a new batch", func() bool {
		s := b.fake.Stats().Batches
		return s.Canceled > 0 && s.Created == 2
	})
	clock.Advance(11 * time.Hour)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	stats := b.fake.Stats()
	require.Equal(t, n, stats.Batches.Succeeded)
	require.Equal(t, n+stats.Batches.Canceled, stats.Batches.Lines, "only the canceled lines were sent again")
	b.requireBilledOnce(t)
}

// Batch mode on Anthropic's Message Batches: poisoned lines come back
// errored with the ordinary error envelope and are dead-lettered as a
// synchronous call's would be.
func TestBatchModeAnthropic(t *testing.T) {
	t.Parallel()
	b, _ := setupBatch(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, "batch", tweaks{vendor: "anthropic"})
	const n = 200
	b.enqueue(t, "b1", records(n, poisoned(10)))
	b.start(t)
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, n-n/10, st.Completed)
	require.Equal(t, n/10, st.DeadLettered)
	for _, d := range b.deadLetters(t, "b1") {
		require.Equal(t, "rejected", d.Class)
		require.Equal(t, 400, d.HTTPStatus)
	}
	stats := b.fake.Stats()
	require.Equal(t, n, stats.Batches.Lines)
	b.requireBilledOnce(t)
	costUSD, syncUSD, _ := b.ledgerBill(t)
	require.InDelta(t, 2*costUSD, syncUSD, 1e-9)
}

// The balance runs out mid-batch: the lines refused for it are not billed
// and wait as pending, the key's breaker opens (no new provider batch, no
// synchronous call), and once the account is topped up the submitter's
// next create is the probe that closes it; every record completes, each
// billed once.
func TestBatchModeExhaustedBalanceTripsTheKeyAndResumes(t *testing.T) {
	t.Parallel()
	const n = 40
	// Room for about half of the lines at batch prices.
	sc := fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 20 * 7.5e-6}}
	b, _ := setupBatch(t, sc, "batch", tweaks{})
	b.oneGather(n, 2*time.Second)
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	eventually(t, 30*time.Second, "the key trips, with its alert", func() bool { return b.hooks.count("key_exhausted") >= 1 })
	require.True(t, keyOpen(t, b), "the breaker opened, and only a real call to the provider closes it")
	require.Zero(t, b.hooks.count("key_resumed"), "no probe call succeeded: the balance is spent")
	done := b.status(t, "b1").Completed
	require.Less(t, done, n)
	require.Equal(t, 1, b.fake.Stats().Batches.Created, "no new batch while the key is exhausted")
	b.fake.TopUp(1)
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, n, st.Completed)
	stats := b.fake.Stats()
	require.GreaterOrEqual(t, stats.Batches.Created, 2)
	require.Equal(t, n, stats.Batches.Succeeded)
	b.requireBilledOnce(t)
}

func keyOpen(t *testing.T, b *testBundle) bool {
	var open bool
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM triage_key_state WHERE state <> 'closed')`).Scan(&open))
	return open
}

// Two worker processes on the same key: their submitters share the pending
// lines and the provider batch rows through PostgreSQL, so each line is
// sent in exactly one provider batch and billed once.
func TestBatchModeFleetSendsEachLineOnce(t *testing.T) {
	t.Parallel()
	b, _ := setupBatch(t, fakeprovider.Scenario{}, "batch", tweaks{})
	const n = 300
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	b.start(t)
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, n, st.Completed)
	stats := b.fake.Stats()
	require.Equal(t, n, stats.Batches.Lines, "no line in two provider batches")
	require.Equal(t, stats.Batches.Created, b.providerBatches(t)["collected"], "every provider batch recorded and collected once")
	b.requireBilledOnce(t)
}

// Anthropic batches carry no metadata: an intent row whose create answer was
// lost is matched by its custom_ids, which can only be read once the
// candidate batch has ended. Until then nothing is sent again.
func TestBatchIntentRowWaitsForAnUnconfirmedCandidate(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)}}
	b, clock := setupBatch(t, sc, "batch", tweaks{vendor: "anthropic"})
	lossy := &lossyCreate{}
	b.opts.HTTPClient = &http.Client{Transport: lossy}
	const n = 20
	b.oneGather(n, 5*time.Second)
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	eventually(t, 30*time.Second, "the create went out and its answer was lost", func() bool {
		return lossy.hasLost()
	})
	polls := b.fake.Stats().Batches.Polls
	eventually(t, 30*time.Second, "the submitter looks for the batch", func() bool { return b.fake.Stats().Batches.Polls >= polls+3 })
	require.Equal(t, 1, b.fake.Stats().Batches.Created, "an unconfirmed candidate is waited for, not sent again")
	require.Equal(t, 1, b.providerBatches(t)["intent"])
	clock.Advance(2 * time.Hour)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	require.Equal(t, 1, b.fake.Stats().Batches.Created)
	b.requireBilledOnce(t)
}

// Lines answered with a transient failure (a 500 inside the batch) are
// retried in a later provider batch, each retry an attempt of its own
// against max_attempts, as a synchronous retry would be.
func TestBatchModeTransientLinesGoIntoTheNextBatch(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Seed: 7, Random: []fakeprovider.RandomFault{{P: 0.3, Action: fakeprovider.ActionServerError}}}
	b, _ := setupBatch(t, sc, "batch", tweaks{})
	const n = 60
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, n, st.Completed)
	stats := b.fake.Stats()
	require.Positive(t, stats.Batches.Errored, "some lines failed")
	require.GreaterOrEqual(t, stats.Batches.Created, 2, "and went into a later batch")
	require.Equal(t, n+stats.Batches.Errored, stats.Batches.Lines)
	b.requireBilledOnce(t)
	var failed int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM triage_attempt WHERE mode = 'batch' AND status = 'failed' AND class = 'transient'`).Scan(&failed))
	require.Equal(t, stats.Batches.Errored, failed, "each failed line is a failed attempt in the ledger")
}

// Anthropic validates a batch's envelope at create: a create refused with a
// 400 names no line. When every create is refused (the refusal is about no
// line), the halving stops after 2·⌈log2 n⌉+2 refusals in a row: each line
// gets the refusal as its answer and is dead-lettered with the classifier's
// reason, with one batch_refused alert, instead of being resent forever or
// split down to every line (2n−1 creates).
func TestBatchCreateRejectedDeadLettersItsLines(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{
		FailValidation: &fakeprovider.BatchError{Code: "invalid_request_error", Message: "requests: too many"}}}
	b, _ := setupBatch(t, sc, "batch", tweaks{vendor: "anthropic"})
	const n = 64
	b.oneBatch(n)
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	st := b.waitSettled(t, "b1", 90*time.Second)
	require.Equal(t, n, st.DeadLettered)
	for _, d := range b.deadLetters(t, "b1") {
		require.Equal(t, "rejected", d.Class)
		require.Equal(t, 400, d.HTTPStatus)
	}
	stats := b.fake.Stats()
	require.Zero(t, stats.Batches.Created)
	// The 14th refusal in a row (2·6+2) ends the halving; the halves
	// already split off are refused once more each: fewer than twice that.
	limit := 2*ceilLog2(n) + 2
	require.GreaterOrEqual(t, stats.Batches.CreatesRefused, limit)
	require.Less(t, stats.Batches.CreatesRefused, 2*limit, "O(log n), not 2n-1 (%d) nor a loop", 2*n-1)
	eventually(t, 10*time.Second, "the refusals are alerted", func() bool { return b.hooks.count("batch_refused") == 1 })
	require.Zero(t, stats.BilledUSD)
	b.requireBilledOnce(t)
}

// A record stopped for good by cancelling its River job (what `triage batch
// cancel`'s help says to do) is never sent in a provider batch.
func TestBatchLineOfACancelledJobIsNotSent(t *testing.T) {
	t.Parallel()
	b, _ := setupBatch(t, fakeprovider.Scenario{}, "batch", tweaks{})
	b.opts.Batch.Gather = time.Hour // nothing is sent until the test says so
	const n = 10
	b.enqueue(t, "b1", records(n, nil))
	rt := b.start(t)
	eventually(t, 30*time.Second, "every job wrote its line and sleeps", func() bool {
		return b.lineStates(t)["pending"] == n && b.jobStates(t)["scheduled"] == n
	})
	var jobID int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT job_id FROM triage_provider_batch_line WHERE record_id = 'r003'`).Scan(&jobID))
	job, err := rt.River().JobCancel(context.Background(), jobID)
	require.NoError(t, err)
	require.Equal(t, "cancelled", string(job.State))
	// Lines that have waited ten gathers are sent: age them.
	_, err = b.db.Pool.Exec(context.Background(), `UPDATE triage_provider_batch_line SET pending_since = now() - interval '1 day'`)
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the other records complete", func() bool { return b.status(t, "b1").Completed == n-1 })
	stats := b.fake.Stats()
	require.Equal(t, n-1, stats.Batches.Lines, "the cancelled job's line was not sent")
	// Its line is closed and its attempt settled as not run ($0), not left
	// an intent the ledger would count as possibly billed: by the
	// submitter's sweep, which runs every few ticks, so it is waited for
	// before the ledger is checked.
	eventually(t, 30*time.Second, "the cancelled job's line is closed, its attempt not run", func() bool {
		var line, status, reason string
		var cost float64
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT l.state, a.status, coalesce(a.reason, ''), a.cost_usd::float8
			FROM triage_provider_batch_line l JOIN triage_attempt a ON a.id = l.attempt_id WHERE l.record_id = 'r003'`).Scan(&line, &status, &reason, &cost))
		return line == "applied" && status == "failed" && reason == "batch_not_run" && cost == 0
	})
	b.requireBilledOnce(t)
}

// Lines of an auto pipeline still waiting for a provider batch when the
// deadline comes within the margin are taken back by their jobs and sent
// synchronously; no provider batch is created for them.
func TestAutoModePendingLinesGoSyncNearTheDeadline(t *testing.T) {
	t.Parallel()
	b, clock := setupBatch(t, fakeprovider.Scenario{}, "auto", tweaks{})
	b.opts.Batch.Gather = time.Hour // the lines wait
	const n = 20
	b.enqueue(t, "b1", records(n, nil))
	deadline := clock.Now().Add(5 * time.Hour)
	b.setDeadline(t, "b1", deadline)
	b.start(t)
	eventually(t, 30*time.Second, "every job wrote its line", func() bool { return b.lineStates(t)["pending"] == n })
	clock.Advance(3 * time.Hour) // 2 h left, within the 3 h margin
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	stats := b.fake.Stats()
	require.Zero(t, stats.Batches.Created)
	require.Equal(t, n, stats.Requests, "each record one synchronous call")
	b.requireBilledOnce(t)
	require.Equal(t, n, notRun(t, b), "each batch attempt settled as not run, $0")
	_, _, byMode := b.ledgerBill(t)
	require.Equal(t, n, byMode["sync"])
}

// badRecord puts marker in record r<at> only.
func badRecord(at int, marker string) func(i int) string {
	return func(i int) string {
		if i+1 == at {
			return `,"note":"` + marker + `"`
		}
		return ""
	}
}

// ceilLog2 is the number of halvings that take n lines to one.
func ceilLog2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

// One record makes the provider refuse its whole batch, naming no line (an
// OpenAI file error at validation, an Anthropic 400 at create): the
// submitter splits the refused batches in halves until that line is alone,
// so exactly that record is dead-lettered, every other one completes, and
// the refusals cost O(log n) extra creates.
func TestBatchRefusedNamingNoLineIsBisected(t *testing.T) {
	t.Parallel()
	const n, bad = 64, 17
	for _, vendor := range []string{"openai", "anthropic"} {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			fv := &fakeprovider.BatchError{Code: "too_many_tasks", Message: "Enqueued token limit reached."}
			if vendor == "anthropic" {
				fv = &fakeprovider.BatchError{Code: "invalid_request_error", Message: "requests.0.params: invalid"}
			}
			sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{FailValidation: fv, FailValidationIf: "BADLINE"}}
			b, _ := setupBatch(t, sc, "batch", tweaks{vendor: vendor})
			// The n lines form one provider batch however slowly a loaded
			// machine writes them (the 200 ms gather split them, and each
			// extra first batch adds its own halvings).
			b.oneGather(n, time.Hour)
			b.enqueue(t, "b1", records(n, badRecord(bad, "BADLINE")))
			b.start(t)
			st := b.waitSettled(t, "b1", 60*time.Second)
			require.Equal(t, n-1, st.Completed, "every other record completes")
			require.Equal(t, 1, st.DeadLettered)
			dls := b.deadLetters(t, "b1")
			require.Len(t, dls, 1)
			require.Equal(t, fmt.Sprintf("r%03d", bad), dls[0].RecordID, "exactly the bad record")
			require.Equal(t, "rejected", dls[0].Class)

			stats := b.fake.Stats()
			levels := ceilLog2(n)
			refused, accepted := stats.Batches.FailedValidation, stats.Batches.Created-stats.Batches.FailedValidation
			if vendor == "anthropic" {
				refused, accepted = stats.Batches.CreatesRefused, stats.Batches.Created
				require.Equal(t, 400, dls[0].HTTPStatus)
				require.Equal(t, "invalid_request_error", dls[0].VendorCode)
				require.Zero(t, b.hooks.count("batch_refused"), "a line refused alone is a bad record, not an alert")
			} else {
				require.Equal(t, "batch_validation:too_many_tasks", dls[0].Reason)
				require.Equal(t, "too_many_tasks", dls[0].VendorCode)
				require.Contains(t, dls[0].ErrorExcerpt, "Enqueued token limit")
				eventually(t, 10*time.Second, "a file error that persists on one line is alerted", func() bool {
					return b.hooks.count("batch_refused") == 1
				})
			}
			// The n lines went out in one batch: levels+1 refusals at most,
			// and as many accepted halves.
			require.LessOrEqual(t, refused, levels+1, "one refusal per halving, down to the line")
			require.GreaterOrEqual(t, refused, 2, "the batch was refused, then split")
			require.LessOrEqual(t, refused+accepted, 2*levels+2, "O(log n) creates")
			require.Equal(t, n-1, stats.Batches.Succeeded)
			require.Equal(t, n-1, stats.Batches.Lines, "each good line in one accepted batch, once")
			b.requireBilledOnce(t)
			require.Equal(t, map[string]int{"applied": n}, b.lineStates(t))
		})
	}
}

// A job cancelled by hand, and one deleted by hand, while their lines are
// in a live provider batch: the provider runs and bills those lines anyway.
// When the batch's answers come, their attempts are finished with the real
// cost (the ledger is still exactly the provider's bill, nothing left
// possibly billed), and no result is stored for them.
func TestBatchLineOfAJobCancelledInFlightIsBilledNotStored(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)}}
	b, clock := setupBatch(t, sc, "batch", tweaks{})
	b.opts.SpendCheck = 20 * time.Millisecond // the sweep that settles stopped jobs' records
	const n = 10
	b.oneGather(n, 5*time.Second)
	b.enqueue(t, "b1", records(n, nil))
	rt := b.start(t)
	eventually(t, 30*time.Second, "the provider batch is submitted", func() bool { return b.providerBatches(t)["submitted"] == 1 })
	ctx := context.Background()
	eventually(t, 30*time.Second, "every job sleeps", func() bool { return b.jobStates(t)["scheduled"] == n })
	_, err := rt.River().JobCancel(ctx, b.jobOf(t, "b1", "r003"))
	require.NoError(t, err)
	_, err = rt.River().JobDelete(ctx, b.jobOf(t, "b1", "r005"))
	require.NoError(t, err)
	clock.Advance(2 * time.Hour)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n-2, st.Completed)
	eventually(t, 30*time.Second, "the stopped jobs' attempts are settled", func() bool {
		var open int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM triage_attempt WHERE status = 'intent'`).Scan(&open))
		return open == 0
	})
	// Their paid answers are held for a requeue (ledger.AdoptBatchLine).
	require.Equal(t, map[string]int{"applied": n - 2, "answered": 2}, b.lineStates(t))
	stats := b.fake.Stats()
	require.Equal(t, n, stats.Batches.Succeeded, "the provider ran every line, the stopped ones too")
	require.Equal(t, 1, stats.ByRecord[b.customID(t, "r003")].Billed)
	b.requireBilledOnce(t) // the ledger is the bill: the stopped lines' cost is in it
	for _, rec := range []string{"r003", "r005"} {
		var (
			status, reason string
			costUSD        float64
			results        int
		)
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT status, reason, cost_usd::float8 FROM triage_attempt
			WHERE batch = 'b1' AND record_id = $1`, rec).Scan(&status, &reason, &costUSD))
		require.Equal(t, "ok", status, rec)
		require.Equal(t, submitter.ReasonJobGone, reason, rec)
		require.Positive(t, costUSD, "%s: billed at its real cost", rec)
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM triage_result WHERE batch = 'b1' AND record_id = $1`, rec).Scan(&results))
		require.Zero(t, results, "%s: no result stored for a stopped job", rec)
	}
}

// customID is the custom_id (idempotency key) a record's line was sent with.
func (b *testBundle) customID(t *testing.T, record string) string {
	t.Helper()
	var id string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT custom_id FROM triage_provider_batch_line WHERE record_id = $1 LIMIT 1`, record).Scan(&id))
	return id
}

// A provider batch's counts are stored as its vendor's request_counts names
// them (what `triage status` shows and its "counts" promises), not in
// triage's own vocabulary.
func TestBatchCountsInTheVendorsWords(t *testing.T) {
	t.Parallel()
	want := map[string]map[string]int{
		"openai":    {"total": 20, "completed": 18, "failed": 2},
		"anthropic": {"processing": 0, "succeeded": 18, "errored": 2, "canceled": 0, "expired": 0},
	}
	for vendor, counts := range want {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			b, _ := setupBatch(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, "batch", tweaks{vendor: vendor})
			b.oneGather(20, 5*time.Second)
			b.enqueue(t, "b1", records(20, poisoned(10)))
			b.start(t)
			b.waitSettled(t, "b1", 60*time.Second)
			var raw []byte
			require.NoError(t, b.db.Pool.QueryRow(context.Background(),
				`SELECT counts FROM triage_provider_batch ORDER BY id DESC LIMIT 1`).Scan(&raw))
			var got map[string]int
			require.NoError(t, json.Unmarshal(raw, &got))
			require.Equal(t, counts, got)
		})
	}
}

// Anthropic's batches are found by their custom_ids, and a line sent again
// (its first provider batch expired) keeps its custom_id. A process that
// dies between the intent row of the second batch and its create leaves a
// row whose lines match the first, ended batch: that batch is another row's
// and must not be taken for this one's (night 60014: the row was "found"
// as an already recorded batch on every lease, its records never settled).
func TestAnthropicIntentRowIsNotMatchedToAnEarlierBatchOfItsLines(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour),
		ExpireShare: 1, ExpireAfter: fakeprovider.Duration(2 * time.Hour)}}
	b, clock := setupBatch(t, sc, "batch", tweaks{vendor: "anthropic"})
	b.opts.Batch.Gather = time.Hour // lines are sent when the test ages them
	const n = 3
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	ctx := context.Background()
	b.sendTogether(t, n)
	eventually(t, 30*time.Second, "the first provider batch is submitted", func() bool {
		return b.lineStates(t)["submitted"] == n && b.providerBatches(t)["submitted"] == 1
	})
	// The first batch expires with every line unfinished; the lines wait
	// for the next one.
	require.NoError(t, b.fake.SetScenario(fakeprovider.Scenario{APIKey: workertest.APIKey, NoReplay: true, Now: clock.Now}))
	clock.Advance(3 * time.Hour)
	eventually(t, 30*time.Second, "the expired lines wait again", func() bool { return b.lineStates(t)["pending"] == n })
	// A process wrote the next batch's intent row and died before the
	// create: the row is due, its lease long gone.
	var key, model string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT key, model FROM triage_provider_batch LIMIT 1`).Scan(&key, &model))
	_, err := b.db.Pool.Exec(ctx, `WITH r AS (
			INSERT INTO triage_provider_batch (key, vendor, model, lines, next_poll_at)
			VALUES ($1, 'anthropic', $2, $3, $4) RETURNING id)
		UPDATE triage_provider_batch_line SET provider_batch = (SELECT id FROM r), state = 'submitted' WHERE state = 'pending'`,
		key, model, n, clock.Now().Add(-time.Minute))
	require.NoError(t, err)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	require.Equal(t, 2, b.fake.Stats().Batches.Created, "the row's batch was created, the expired one not taken for it")
	b.requireBilledOnce(t)
}

// The balance runs out in the middle of a provider batch and is not topped
// up: the key's breaker opens and its queue is paused, but the records
// whose lines came back answered hold a paid answer that needs no call.
// They are applied at once, not one per probe interval as the key's probe
// (night simulator seed 120349: 40 answered jobs left in the paused queue,
// applied one per probe, past the night's bound).
func TestBatchModeAnswersAreAppliedWhileTheKeyIsExhausted(t *testing.T) {
	t.Parallel()
	const n = 40
	// Room for about half of the lines at batch prices.
	sc := fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 20 * 7.5e-6}}
	b, _ := setupBatch(t, sc, "batch", tweaks{probeInterval: "1h"})
	b.oneGather(n, 2*time.Second)
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	eventually(t, 30*time.Second, "the key trips", func() bool { return b.hooks.count("key_exhausted") >= 1 })
	answered := b.fake.Stats().Batches.Succeeded
	require.Positive(t, answered)
	require.Less(t, answered, n)
	eventually(t, 30*time.Second, "every paid answer applied while the key is exhausted", func() bool {
		return b.status(t, "b1").Completed == answered
	})
	require.True(t, keyOpen(t, b), "applying answers closes no breaker")
	require.Zero(t, b.hooks.count("key_resumed"))
	stats := b.fake.Stats()
	require.Equal(t, 1, stats.Batches.Created, "no new batch while the key is exhausted")
	require.Zero(t, stats.DoubleBilledRecords, "nothing billed twice")
	costUSD, _, _ := b.ledgerBill(t)
	require.InDelta(t, stats.BilledUSD, costUSD, 1e-9, "the ledger is the provider's bill")
	var pending int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM triage_provider_batch_line WHERE state = 'pending'`).Scan(&pending))
	require.Equal(t, n-answered, pending, "the lines refused for the balance wait, unsent")
}

// allLinesSubmitted waits until each of the n lines is in a provider
// batch the provider created and that is still running, and returns how
// many the provider created: on a loaded machine the 200 ms gather window
// can split the lines over more than one.
func (b *testBundle) allLinesSubmitted(t *testing.T, n int) int {
	t.Helper()
	eventually(t, 30*time.Second, "every line is in a submitted provider batch", func() bool {
		// One snapshot: every line submitted and no provider batch row
		// still to be created. (Read in two statements, a batch formed
		// between them passed for sent, and was created after the test's
		// clock jump: "no new provider batch near the deadline: expected 1,
		// actual 2".) The fake is asked after the snapshot: no batch can
		// be formed once every line is in a submitted one.
		ls, pb := b.batchSnapshot(t)
		return ls["submitted"] == n && pb["intent"] == 0 && pb["uploaded"] == 0 &&
			pb["submitted"] >= 1 && b.fake.Stats().Batches.Created == pb["submitted"]
	})
	return b.fake.Stats().Batches.Created
}
