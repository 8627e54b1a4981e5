package worker_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// aheadClock is a clock standing a fixed offset ahead of another: a worker
// host whose clock is off.
type aheadClock struct {
	base interface{ Now() time.Time }
	by   time.Duration
}

func (c aheadClock) Now() time.Time { return c.base.Now().Add(c.by) }

// A worker host whose clock runs 10 minutes ahead of the provider's loses
// the answer of a batch create: the look-up after it must still find the
// provider batch (it was created, and is billed), not create the whole
// batch again. The window of the look-up does not depend on the host's
// clock agreeing with the provider's.
func TestBatchLookUpFindsTheBatchWithTheWorkerClockAhead(t *testing.T) {
	t.Parallel()
	for _, vendor := range []string{"openai", "anthropic"} {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			b, clock := setupBatch(t, fakeprovider.Scenario{}, "batch", tweaks{vendor: vendor})
			b.opts.Clock = aheadClock{base: clock, by: 10 * time.Minute}
			lossy := &lossyCreate{}
			foreign := &foreignBatch{}
			created := 1
			if vendor == "openai" {
				lossy.afterLoss, created = foreign.create, 2
			}
			b.opts.HTTPClient = &http.Client{Transport: lossy}
			const n = 20
			b.enqueue(t, "b1", records(n, nil))
			b.start(t)
			st := b.waitSettled(t, "b1", 30*time.Second)
			require.Equal(t, n, st.Completed)
			require.True(t, lossy.hasLost(), "the create's answer was lost")
			stats := b.fake.Stats()
			require.Equal(t, created, stats.Batches.Created, "the batch was found, not created again")
			require.Zero(t, stats.DoubleBilledRecords, "no line billed twice")
			if vendor == "anthropic" {
				b.requireBilledOnce(t) // (the foreign batch is on the provider's bill, not ours)
			}
		})
	}
}
