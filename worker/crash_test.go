package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/submitter"
)

// helperEnv carries a worker process's settings from a test to the test
// binary re-executed as that process.
const helperEnv = "TRIAGE_TEST_WORKER_PROCESS"

type helperSpec struct {
	DatabaseURL string `json:"database_url"`
	ConfigTOML  string `json:"config_toml"`
	// Batch times the process's batch submitters (batch-mode tests).
	Batch submitter.Tuning `json:"batch"`
}

// TestMain lets the test binary double as a worker process that a test can
// kill -9, which no in-process stop can imitate: nothing runs after it.
func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(workerProcess(spec))
	}
	os.Exit(m.Run())
}

func workerProcess(specJSON string) int {
	var spec helperSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg, err := config.Parse([]byte(spec.ConfigTOML), "helper.toml")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, spec.DatabaseURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rt, err := worker.New(worker.Options{
		Config: cfg, Pool: pool, Getenv: func(string) string { return "sk-test-secret" },
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		BackoffBase: 10 * time.Millisecond, BackoffCap: 100 * time.Millisecond,
		FetchCooldown: 5 * time.Millisecond, SupervisorTick: 25 * time.Millisecond,
		Batch: spec.Batch,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := rt.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	<-ctx.Done()
	return 0
}

// A worker killed mid-batch (SIGKILL: no deferred code, no ledger outcome,
// jobs left running) and a worker started after it lose no record. The
// provider does not replay a repeated Idempotency-Key (as no real one
// does), so the calls cut by the kill and sent again are billed twice; every
// such bill is in the ledger as possibly billed, never hidden.
func TestCrashMidBatchLosesNothingAndHidesNoDoubleBill(t *testing.T) {
	t.Parallel()
	// Latency keeps calls in flight when the process dies. The call
	// timeout is long enough that no healthy 30 ms call is cut, even on a
	// loaded machine: a cut call is sent again and billed twice, which the
	// ledger would show but the bound on the kill's double bills below
	// would not allow (at load 30 a 1 s timeout gave "14 ≤ 8").
	b := setup(t, fakeprovider.Scenario{Latency: fakeprovider.Duration(30 * time.Millisecond), NoReplay: true}, tweaks{concurrency: 8, timeout: "3s"})
	const n = 120
	b.enqueue(t, "b1", records(n, nil))

	var tomlBuf []byte
	tomlBuf = append(tomlBuf, b.tomlText...)
	spec, _ := json.Marshal(helperSpec{DatabaseURL: b.db.URL, ConfigTOML: string(tomlBuf)})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	eventually(t, 30*time.Second, "the worker process is mid-batch", func() bool {
		return b.status(t, "b1").Completed >= n/4 && b.fake.Stats().InFlight > 0
	})
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	killed := b.status(t, "b1")
	require.Less(t, killed.Completed, n, "killed before the end")

	// A new process: River rescues the jobs the dead one left running (after
	// the dead leader's lease ends), and the ledger's intent rows make their
	// retries reuse the idempotency key.
	b.opts.RescueAfter = 3 * time.Second
	b.opts.JobMargin = time.Second
	b.start(t)
	st := b.waitSettled(t, "b1", 90*time.Second)
	require.Equal(t, n, st.Completed, "no record lost")
	require.Zero(t, st.DeadLettered)
	stats := b.fake.Stats()
	var unanswered int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM triage_attempt WHERE status IN ('possibly_billed', 'intent')`).Scan(&unanswered))
	require.LessOrEqual(t, stats.DoubleBilledRecords, unanswered, "every second bill is a possibly billed attempt in the ledger")
	require.LessOrEqual(t, stats.DoubleBilledRecords, 8, "at most the calls in flight at the kill")
	for id, r := range stats.ByRecord {
		require.LessOrEqual(t, r.Billed, 2, "record %s billed %d times", id, r.Billed)
	}
	if stats.DoubleBilledRecords > 0 {
		require.Positive(t, st.PossiblyBilledUSD, "the ledger shows the possible double bills")
	}
}

// One of two workers killed (SIGKILL) with calls in flight, after sending
// and before recording their answers, with ambiguous = "lookup" and replay
// off: the other worker rescues the dead one's jobs, finds each lost call
// in the provider's store by its idempotency key instead of sending it
// again, and nothing is billed twice; the ledger's spend is the provider's
// bill.
func TestKilledWorkerLookupBillsNothingTwice(t *testing.T) {
	t.Parallel()
	// Each answer takes 400 ms to generate and is billed when it ends,
	// whether or not its client is still there to read it.
	b := setup(t, fakeprovider.Scenario{GenerationTime: fakeprovider.Duration(400 * time.Millisecond), NoReplay: true,
		StoreLag: fakeprovider.Duration(100 * time.Millisecond)},
		tweaks{concurrency: 5, timeout: "3s", extraKey: "ambiguous = \"lookup\"\nlookup_wait = \"20s\"\n"})
	const n = 60
	b.enqueue(t, "b1", records(n, nil))

	cmd := b.startProcess(t)
	b.opts.RescueAfter = 3 * time.Second
	b.opts.JobMargin = time.Second
	b.start(t)

	// More calls in flight than the in-process worker's concurrency: the
	// other process has some of them.
	eventually(t, 60*time.Second, "both workers mid-batch with calls in flight", func() bool {
		return b.status(t, "b1").Completed >= n/6 && b.fake.Stats().InFlight > 5
	})
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Less(t, b.status(t, "b1").Completed, n, "killed before the end")

	st := b.waitSettled(t, "b1", 120*time.Second)
	stats := b.fake.Stats()
	require.Zero(t, stats.DoubleBilledRecords, "records billed twice")
	require.Equal(t, n, st.Completed, "no record lost")
	require.Zero(t, st.DeadLettered)
	amb, err := ledger.AmbiguityByKey(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, amb, 1)
	require.Positive(t, amb[0].FoundByLookup, "the dead worker's calls were found by look-up")
	// A call whose intent the dead worker wrote but which it never sent
	// (killed between the two, a window a loaded machine widens) is in no
	// store: looked up for lookup_wait, not found, sent again. The ledger
	// cannot tell it from a lost answer and counts its record as possibly
	// double billed; the provider received it once. Every lost call the
	// provider did receive was found.
	unsent := neverReceived(t, b, stats)
	require.Equal(t, unsent, amb[0].PossiblyDoubleBilled,
		"possibly double billed: only the records whose lost call never reached the provider (%d)", unsent)
	if unsent == 0 {
		require.Zero(t, st.PossiblyBilledUSD, "every lost answer was found")
	}
	require.InDelta(t, stats.BilledUSD, st.SpendUSD, 1e-9, "the ledger equals the provider's bill")
}

// neverReceived counts the records of batch b1 with a lost call (an
// intent or possibly billed attempt) that the provider received fewer
// calls from than the ledger has calls that may have been billed.
func neverReceived(t *testing.T, b *testBundle, stats fakeprovider.Stats) int {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT record_id,
			count(*) FILTER (WHERE status IN ('ok', 'possibly_billed', 'intent'))::int,
			string_agg(status || coalesce(' ' || nullif(reason, ''), '') || coalesce(' ' || resolution, ''), ', ' ORDER BY id)
		FROM triage_attempt WHERE batch = 'b1' AND mode <> 'batch'
		GROUP BY record_id HAVING count(*) FILTER (WHERE status IN ('possibly_billed', 'intent')) > 0`)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			id, attempts string
			calls        int
		)
		require.NoError(t, rows.Scan(&id, &calls, &attempts))
		if got := stats.ByRecord[id].Requests; got < calls {
			t.Logf("record %s: %d calls in the ledger that may have been billed (%s), %d received by the provider", id, calls, attempts, got)
			n++
		}
	}
	require.NoError(t, rows.Err())
	return n
}
