package worker_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// strayHold holds the first provider-batch create until releaseCreate is
// closed (a process stalled in its create past its lease on the row), and
// every cancel until releaseCancel is closed (lines run at the provider
// before the cancel reaches it).
type strayHold struct {
	createOnce, cancelOnce       sync.Once
	createHeld, releaseCreate    chan struct{}
	cancelHeld, releaseCancel    chan struct{}
	letCreateOnce, letCancelOnce sync.Once
}

func newStrayHold() *strayHold {
	return &strayHold{createHeld: make(chan struct{}), releaseCreate: make(chan struct{}),
		cancelHeld: make(chan struct{}), releaseCancel: make(chan struct{})}
}

func (s *strayHold) RoundTrip(r *http.Request) (*http.Response, error) {
	wait := func(release chan struct{}) error {
		select {
		case <-release:
			return nil
		case <-r.Context().Done():
			return r.Context().Err()
		}
	}
	if r.Method == http.MethodPost {
		switch p := r.URL.Path; {
		case strings.HasSuffix(p, "/cancel"):
			s.cancelOnce.Do(func() { close(s.cancelHeld) })
			if err := wait(s.releaseCancel); err != nil {
				return nil, err
			}
		case strings.HasSuffix(p, "/batches"):
			first := false
			s.createOnce.Do(func() { first = true; close(s.createHeld) })
			if first {
				if err := wait(s.releaseCreate); err != nil {
					return nil, err
				}
			}
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (s *strayHold) letCreate() { s.letCreateOnce.Do(func() { close(s.releaseCreate) }) }
func (s *strayHold) letCancel() { s.letCancelOnce.Do(func() { close(s.releaseCancel) }) }

// A process stalls in its provider-batch create past its lease on the row:
// a second process claims the row, finds no batch (the create has not
// landed) and creates its own of the same lines. The first create lands
// at last, and its process cancels that stray batch, but the provider has
// run some of its lines by then: they are billed (OpenAI and Anthropic
// bill a line that ran; the fake does). Those answers must be in the
// ledger: the stray batch is recorded, collected, and each line it ran is
// a paid duplicate of its record (reason stray_duplicate), never its
// result; the lines the cancel stopped cost nothing. The ledger's spend
// plus what it counts as possibly billed covers the provider's bill, and
// no record is billed more times than the ledger says.
func TestBatchStrayCreateIsCollectedAsPaidDuplicates(t *testing.T) {
	t.Parallel()
	for _, vendor := range []string{"openai", "anthropic"} {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)}}
			// A 120 s timeout: a 6 min lease, renewed every 2 min of real
			// time, so no renewal of the stalled process comes within the
			// test's waits (it would cut the held create).
			b, clock := setupBatch(t, sc, "batch", tweaks{vendor: vendor, timeout: "120s"})
			hold := newStrayHold()
			const n = 10
			b.startStalled(t, hold, hold.createHeld, n, "the first process's create")
			// The first process's lease runs out while its create hangs; a
			// second process takes the row over and creates the batch.
			clock.Advance(7 * time.Minute)
			b.start(t)
			// Registered after both processes: it runs before their Stops.
			t.Cleanup(func() { hold.letCreate(); hold.letCancel() })
			eventually(t, 30*time.Second, "the second process creates the batch", func() bool {
				return b.providerBatches(t)["submitted"] >= 1 && b.fake.Stats().Batches.Created == 1
			})
			// The first create lands: a second provider batch of the same
			// lines, which its process cancels as a stray.
			hold.letCreate()
			waitClosed(t, hold.cancelHeld, "the stray batch's cancel")
			require.Equal(t, 2, b.fake.Stats().Batches.Created)
			// Half the lines of both batches run before the cancel lands.
			clock.Advance(30 * time.Minute)
			hold.letCancel()
			eventually(t, 30*time.Second, "the cancel stops the stray's other lines", func() bool {
				return b.fake.Stats().Batches.Canceled > 0
			})
			clock.Advance(2 * time.Hour)
			st := b.waitSettled(t, "b1", 60*time.Second)
			require.Equal(t, n, st.Completed)
			eventually(t, 30*time.Second, "every provider batch collected", func() bool {
				_, batches := b.batchSnapshot(t)
				return batches["submitted"] == 0 && batches["ended"] == 0 && batches["intent"] == 0 && batches["uploaded"] == 0
			})

			stats := b.fake.Stats()
			require.Greater(t, stats.Batches.Succeeded, n, "some lines of the stray batch ran before its cancel")
			require.Less(t, stats.Batches.Succeeded, 2*n, "the cancel stopped the others")
			ctx := context.Background()
			var spend, possibly float64
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT coalesce(sum(cost_usd), 0)::float8,
				coalesce(sum(est_cost_usd) FILTER (WHERE status IN ('possibly_billed', 'intent')), 0)::float8
				FROM triage_attempt`).Scan(&spend, &possibly))
			require.GreaterOrEqual(t, spend+possibly+1e-9, stats.BilledUSD,
				"ledger spend $%.8f + possibly billed $%.8f covers the provider's bill $%.8f", spend, possibly, stats.BilledUSD)
			require.LessOrEqual(t, spend, stats.BilledUSD+1e-9, "the ledger's spend is never above the bill")
			dups := 0
			for _, rec := range records(n, nil) {
				custom := b.customID(t, rec.ID)
				var paid, unsure, dup, results int
				require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE cost_usd > 0),
					count(*) FILTER (WHERE status IN ('possibly_billed', 'intent')),
					count(*) FILTER (WHERE reason = 'stray_duplicate' AND cost_usd > 0),
					(SELECT count(*) FROM triage_result r JOIN triage_attempt o ON o.id = r.attempt_id
						WHERE r.batch = 'b1' AND r.record_id = $1 AND o.idempotency_key = $2)
					FROM triage_attempt WHERE batch = 'b1' AND record_id = $1`, rec.ID, custom).Scan(&paid, &unsure, &dup, &results))
				billed := stats.ByRecord[custom].Billed
				require.LessOrEqual(t, billed, paid+unsure,
					"record %s billed %d times by the provider; the ledger has %d paid and %d possibly billed attempts", rec.ID, billed, paid, unsure)
				require.Equal(t, 1, results, "record %s: its result is its own line's answer, not a duplicate's", rec.ID)
				dups += dup
			}
			require.Equal(t, stats.Batches.Succeeded-n, dups, "each line the stray ran is a paid duplicate in the ledger")
			st = b.status(t, "b1")
			require.Equal(t, dups, st.StrayDuplicates, "triage status shows the paid duplicates")
			require.Positive(t, st.StrayDuplicateUSD)
		})
	}
}
