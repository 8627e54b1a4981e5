package worker_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/enqueue"
)

// oneCallCost prices one call as the fake bills it, by running one record
// through a separate world.
func oneCallCost(t *testing.T, extraPipeline string) float64 {
	t.Helper()
	w := setup(t, fakeprovider.Scenario{}, tweaks{extraPipeline: extraPipeline})
	w.enqueue(t, "warm", records(1, nil))
	w.start(t)
	w.waitSettled(t, "warm", 30*time.Second)
	cost := w.fake.Stats().BilledUSD
	require.Positive(t, cost)
	return cost
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// A batch whose budget covers about half of it: the provider's bill never
// passes the cap by more than the calls in flight, the rest stays queued
// untouched, and raising the budget finishes it.
func TestBatchBudgetPausesAndRaisingItFinishes(t *testing.T) {
	t.Parallel()
	const n, concurrency = 60, 4
	b := setup(t, fakeprovider.Scenario{}, tweaks{concurrency: concurrency, extraPipeline: "max_tokens = 60\n"})
	b.opts.BudgetRecheck = 100 * time.Millisecond
	one := oneCallCost(t, "max_tokens = 60\n")
	budget := one * n / 2
	require.NoError(t, enqueue.Batch(context.Background(), b.db.Pool, b.db.Schema, b.cfg,
		enqueue.Params{Pipeline: "enrich", Batch: "b1", Records: records(n, nil), BudgetUSD: &budget}))
	b.start(t)

	eventually(t, 30*time.Second, "the batch pauses at its cap", func() bool { return b.status(t, "b1").State == ledger.BatchPausedBudget })
	eventually(t, 10*time.Second, "the budget alert", func() bool { return b.hooks.count("budget_reached") == 1 })
	// Calls in flight when the cap was reached finish; then nothing more.
	eventually(t, 10*time.Second, "in-flight calls finish", func() bool { return b.fake.Stats().InFlight == 0 })
	billed := b.fake.Stats().BilledUSD
	// (10 % slack: records differ by a token or two.)
	require.LessOrEqual(t, billed, budget+concurrency*one*1.1, "bill %.8f over cap %.8f by more than the calls in flight", billed, budget)
	st := b.status(t, "b1")
	require.Less(t, st.Completed, n)
	require.Zero(t, st.DeadLettered)
	states := b.jobStates(t)
	require.Zero(t, states["discarded"]+states["cancelled"], "%v", states)

	more := 1.0
	require.NoError(t, ledger.SetBatchBudget(context.Background(), b.db.Pool, "b1", &more))
	st = b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	require.Equal(t, 1, b.hooks.count("budget_reached"))
}

// A provider that fails 60 % of calls with 503 for a while: retries are held
// to the fleet's retry budget across two workers (counted at the provider),
// and every job still completes once the provider recovers. The storm
// breaker, which such a share of failures trips, is off: this is the retry
// budget's test (TestStormOutage is the breaker's).
func TestRetryBudgetHoldsAcrossTwoWorkers(t *testing.T) {
	t.Parallel()
	const n, floor, share = 100, 5, 0.2
	b := setup(t, fakeprovider.Scenario{Seed: 7, Random: []fakeprovider.RandomFault{{P: 0.6, Action: fakeprovider.ActionOverloaded}}},
		tweaks{concurrency: 4, maxAttempts: 25, extraKey: "retry_budget = 0.2\nstorm_failures = 0\nstorm_share = 0\n"})
	b.opts.RetryWindow = 20 * time.Second
	b.opts.RetryFloor = floor
	b.opts.RetryDefer = 100 * time.Millisecond
	b.enqueue(t, "b1", records(n, nil))
	b.startWith(t, b.cfg, "w1")
	b.startWith(t, b.cfg, "w2")

	// Every record has had its first call, and the failing ones have been
	// waiting on backoff for a while.
	eventually(t, 30*time.Second, "every record was tried once", func() bool { return len(b.fake.Stats().ByRecord) == n })
	settle := time.Now().Add(time.Second)
	eventually(t, 10*time.Second, "a second of retries", func() bool { return time.Now().After(settle) })
	// Count at the provider the retries that failed (a retry that succeeds
	// does not amplify the outage and frees its place in the budget).
	stats := b.fake.Stats()
	failedRetries, retries := 0, 0
	for _, r := range stats.ByRecord {
		for i, code := range r.Statuses {
			if i == 0 {
				continue
			}
			retries++
			if code >= 500 {
				failedRetries++
			}
		}
	}
	allowed := max(floor, share*float64(n))
	// Two workers each check the budget then call: at most their in-flight
	// calls (2 x 4) can pass it together.
	require.LessOrEqual(t, float64(failedRetries), allowed+8, "failed retries %d over the budget %.0f", failedRetries, allowed)
	require.Positive(t, retries, "some retries were allowed")
	t.Logf("during the outage: %d first calls, %d retries, %d of them failed; budget %.0f", n, retries, failedRetries, allowed)

	require.NoError(t, b.fake.SetScenario(fakeprovider.Scenario{APIKey: "sk-test-secret"}))
	st := b.waitSettled(t, "b1", 90*time.Second)
	require.Equal(t, n, st.Completed, "deferred retries are not dropped")
}

// Prepaid alerts fire once each at 70 % and 90 %, and the spend-rate alert
// once, however many workers watch.
func TestPrepaidAndSpendRateAlertsFireOnce(t *testing.T) {
	t.Parallel()
	one := oneCallCost(t, "")
	const n = 40
	// prepaid = 40 calls / 0.95: both thresholds pass during the batch.
	b2 := setup(t, fakeprovider.Scenario{}, tweaks{
		extraKey:    "prepaid_usd = " + ftoa(one*n/0.95) + "\n",
		extraAlerts: "max_usd_per_hour = " + ftoa(one*n/2) + "\n",
	})
	b2.opts.SpendCheck = 20 * time.Millisecond
	b2.enqueue(t, "b1", records(n, nil))
	b2.startWith(t, b2.cfg, "w1")
	b2.startWith(t, b2.cfg, "w2")
	b2.waitSettled(t, "b1", 30*time.Second)
	eventually(t, 10*time.Second, "the three alerts", func() bool {
		return b2.hooks.count("prepaid_70") == 1 && b2.hooks.count("prepaid_90") == 1 && b2.hooks.count("spend_rate") == 1
	})
	// A few more checks pass: still once each.
	later := time.Now().Add(200 * time.Millisecond)
	eventually(t, 5*time.Second, "more checks", func() bool { return time.Now().After(later) })
	require.Equal(t, 1, b2.hooks.count("prepaid_70"), b2.hooks.all())
	require.Equal(t, 1, b2.hooks.count("prepaid_90"), b2.hooks.all())
	require.Equal(t, 1, b2.hooks.count("spend_rate"), b2.hooks.all())
}
