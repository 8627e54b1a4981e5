package submitter

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/batchapi"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
)

// hostClock is a host's own clock, off by skew.
type hostClock time.Duration

func (h hostClock) Now() time.Time { return time.Now().Add(time.Duration(h)) }

// A provider batch row's lease holds for the whole fleet whatever the
// clock of the host that took it. Leases were written by the host's
// clock: a host a minute behind wrote leases that had run out a minute
// before in every other process's eyes, so another process took the row
// while the first was still creating its provider batch, created it
// again, and the first cancelled its own as a stray — too late when its
// lines were already answered (night 160188 of the simulator: two records
// billed twice, the second bill nowhere in the ledger). Leases are now
// the database's time: each submitter reads its host's offset from the
// database's clock and writes every row time by the corrected clock.
func TestASkewedHostsLeaseHoldsForTheFleet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	_, err := ledger.CreateProviderBatch(ctx, db.Pool, ledger.NewProviderBatch{
		Key: "k", Vendor: "anthropic", Model: "m", NextPollAt: time.Now().Add(-2 * time.Minute)})
	require.NoError(t, err)
	for _, skew := range []time.Duration{-time.Minute, time.Minute} {
		newSubmitter := func(host keys.Clock) *Submitter {
			return &Submitter{
				cfg: Config{Pool: db.Pool, RiverSchema: db.Schema, HostClock: host,
					Key: &config.Key{Name: "k", Vendor: "anthropic"}},
				t: Tuning{Lease: 5 * time.Second}.WithDefaults(), key: "k", log: slog.New(slog.DiscardHandler),
				limit: batchapi.Limits{MaxLines: 100, MaxBytes: 1 << 20},
			}
		}
		skewed, right := newSubmitter(hostClock(skew)), newSubmitter(nil)
		require.NoError(t, skewed.alignClock(ctx))
		require.NoError(t, right.alignClock(ctx))

		first, second := skewed, right
		if skew > 0 {
			// A host ahead must not take a row another host holds.
			first, second = right, skewed
		}
		r, err := first.claim(ctx)
		require.NoError(t, err)
		require.NotNil(t, r, "skew %s: the row is due", skew)
		other, err := second.claim(ctx)
		require.NoError(t, err)
		require.Nil(t, other, "skew %s: the row is leased for %s; another process took it at once", skew, first.t.Lease)
		// Give the row back for the next case.
		require.NoError(t, ledger.RescheduleProviderBatch(ctx, db.Pool, *r, time.Now().Add(-2*time.Minute)))
	}
}

// A lease renewal whose answer is lost after PostgreSQL committed it (a
// timeout: hold gives a renewal a third of a Lease, 100 s in production
// but well under a second in tests, and a database failover or a loaded
// machine can take longer) was taken for a lost lease: the row's lease in
// memory went stale although no other process owned the row, so a create
// that succeeded meanwhile could not be recorded (ErrLeaseLost), was
// recorded as a stray of its own row and cancelled, and the row created
// its whole provider batch again at its next claim: paid twice. The row's
// lease now says whether the renewal committed.
func TestARenewalWhoseAnswerIsLostKeepsTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	lostAnswer := errors.New("renew: timeout: context deadline exceeded")
	for _, tc := range []struct {
		name      string
		committed bool
	}{{"committed", true}, {"not committed", false}} {
		_, err := ledger.CreateProviderBatch(ctx, db.Pool, ledger.NewProviderBatch{
			Key: "k-" + tc.name, Vendor: "anthropic", Model: "m", NextPollAt: time.Now().Add(-2 * time.Minute)})
		require.NoError(t, err)
		s := &Submitter{
			cfg: Config{Pool: db.Pool, RiverSchema: db.Schema, Key: &config.Key{Name: "k-" + tc.name, Vendor: "anthropic"}},
			t:   Tuning{Lease: 5 * time.Second}.WithDefaults(), key: "k-" + tc.name, log: slog.New(slog.DiscardHandler),
			limit: batchapi.Limits{MaxLines: 100, MaxBytes: 1 << 20},
			renewRow: func(ctx context.Context, dbtx ledger.DBTX, r *ledger.ProviderBatch, until time.Time, sends int) error {
				if tc.committed {
					written := *r
					require.NoError(t, ledger.RenewProviderBatch(ctx, dbtx, &written, until, sends))
				}
				return lostAnswer
			},
		}
		r, err := s.claim(ctx)
		require.NoError(t, err)
		require.NotNil(t, r)
		err = s.renewSending(ctx, r)
		if !tc.committed {
			require.ErrorIs(t, err, lostAnswer, "%s: a renewal that did not commit is an error", tc.name)
			require.NotErrorIs(t, err, errLeaseLost, "%s: no other process took the row", tc.name)
			continue
		}
		require.NoError(t, err, "%s: the renewal committed: the lease is still this process's", tc.name)
		// The create that ran under the lease is recorded as the row's own
		// batch, not a stray.
		require.NoError(t, ledger.RecordSubmitted(ctx, db.Pool, *r, ledger.SubmittedBatch{ProviderID: "msgbatch_1", VendorStatus: "in_progress", Counts: []byte(`{}`)},
			time.Now(), time.Now().Add(time.Minute)), "%s: the row's own batch is recorded", tc.name)
	}
}
