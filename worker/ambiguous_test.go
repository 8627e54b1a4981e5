package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
)

// With ambiguous = "dead_letter" a call that hangs after the provider
// billed it is never resent: against a provider that does not replay a
// repeated Idempotency-Key, nothing is billed twice, and the hung records
// are dead-lettered as ambiguous with their one possibly billed attempt.
func TestAmbiguousDeadLetterNeverBillsTwice(t *testing.T) {
	t.Parallel()
	hang := steps(act(fakeprovider.ActionHang))
	b := setup(t, fakeprovider.Scenario{RecordScripts: map[string][]fakeprovider.Step{"r001": hang, "r004": hang}, NoReplay: true},
		tweaks{timeout: "3s", extraKey: "ambiguous = \"dead_letter\"\n"})
	const n = 6
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n-2, st.Completed, "every good record completed")
	require.Equal(t, 2, st.DeadLettered)
	stats := b.fake.Stats()
	require.Zero(t, stats.DoubleBilledRecords, "records billed twice")
	for _, id := range []string{"r001", "r004"} {
		require.Equal(t, 1, stats.ByRecord[id].Requests, "%s: the hung call is not resent", id)
		require.Equal(t, 1, stats.ByRecord[id].Billed, "%s: billed once", id)
	}
	dls, err := ledger.ListDeadLetters(context.Background(), b.db.Pool, ledger.DeadLetterFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, dls, 2)
	for _, d := range dls {
		require.Equal(t, classify.Ambiguous.String(), d.Class, d.RecordID)
		require.Equal(t, decide.ReasonAmbiguousUnresolved, d.Reason, d.RecordID)
		require.Equal(t, 1, d.Attempts, d.RecordID)
	}
	attempts, err := ledger.ListAttempts(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	possibly := 0
	for _, a := range attempts {
		if a.Status == ledger.AttemptPossiblyBilled {
			possibly++
		}
	}
	require.Equal(t, 2, possibly, "each hung call stays in the ledger as possibly billed, once")
	amb, err := ledger.AmbiguityByKey(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, amb, 1)
	require.Zero(t, amb[0].PossiblyDoubleBilled)
	require.Equal(t, 2, amb[0].Unanswered)
	require.Equal(t, map[string]int{"dead_lettered": 2}, lostAnswers(t, b),
		"each lost call's attempt says it was dead-lettered, not resent")
}

// lostAnswers counts the attempts whose answer was lost by how each was
// resolved (triage_attempt.resolution).
func lostAnswers(t *testing.T, b *testBundle) map[string]int {
	t.Helper()
	return b.countBy(t, "SELECT resolution, count(*) FROM triage_attempt WHERE resolution IS NOT NULL GROUP BY 1")
}

// With ambiguous = "lookup" a call that hangs after the provider billed it
// is looked up at the provider (OpenAI stored completions, found by its
// idempotency key in the metadata) before any resend: the stored answer is
// the result, billed once, and the ledger's spend equals the provider's bill.
func TestAmbiguousLookupNeverBillsTwice(t *testing.T) {
	t.Parallel()
	hang := steps(act(fakeprovider.ActionHang))
	b := setup(t, fakeprovider.Scenario{RecordScripts: map[string][]fakeprovider.Step{"r001": hang, "r004": hang}, NoReplay: true,
		StoreLag: fakeprovider.Duration(200 * time.Millisecond)},
		tweaks{timeout: "3s", extraKey: "ambiguous = \"lookup\"\nlookup_wait = \"10s\"\n"})
	const n = 6
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	stats := b.fake.Stats()
	billedTwice := 0
	for _, r := range stats.ByRecord {
		if r.Billed > 1 {
			billedTwice++
		}
	}
	require.Zero(t, billedTwice, "records billed twice: %d", billedTwice)
	require.Equal(t, n, st.Completed, "every good record completed")
	require.Zero(t, st.DeadLettered)
	for _, id := range []string{"r001", "r004"} {
		require.Equal(t, 1, stats.ByRecord[id].Billed, "%s: billed once", id)
	}
	require.Zero(t, st.PossiblyBilledUSD, "every unanswered call was found")
	require.InDelta(t, stats.BilledUSD, st.SpendUSD, 1e-6, "the ledger equals the provider's bill")
	amb, err := ledger.AmbiguityByKey(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, amb, 1)
	require.Equal(t, 2, amb[0].FoundByLookup)
	require.Equal(t, 2, amb[0].Unanswered)
	require.Zero(t, amb[0].PossiblyDoubleBilled)
	require.Equal(t, map[string]int{"found": 2}, lostAnswers(t, b), "each lost call's attempt says it was found by look-up")
}

// With ambiguous = "retry" (the default) a hung call is resent: against a
// provider that does not replay, it is billed twice, and the ledger shows
// each such bill as possibly billed rather than hiding it.
func TestAmbiguousRetryCountsTheDoubleBills(t *testing.T) {
	t.Parallel()
	hang := steps(act(fakeprovider.ActionHang))
	// The timeout also bounds the four calls that do not hang: on a loaded
	// machine a healthy call took longer than 300 ms, timed out, and was
	// billed twice as well (expected 2, got 3).
	b := setup(t, fakeprovider.Scenario{RecordScripts: map[string][]fakeprovider.Step{"r001": hang, "r004": hang}, NoReplay: true},
		tweaks{timeout: "3s"})
	const n = 6
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	stats := b.fake.Stats()
	require.Equal(t, 2, stats.DoubleBilledRecords, "the resends were billed again")
	attempts, err := ledger.ListAttempts(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	possibly := 0
	for _, a := range attempts {
		if a.Status == ledger.AttemptPossiblyBilled {
			possibly++
		}
	}
	require.Equal(t, stats.DoubleBilledRecords, possibly, "every second bill is a possibly billed attempt in the ledger")
	require.Positive(t, st.PossiblyBilledUSD)
	amb, err := ledger.AmbiguityByKey(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, amb, 1)
	require.Equal(t, stats.DoubleBilledRecords, amb[0].PossiblyDoubleBilled, "the ledger reports the double bills as a number")
	require.Zero(t, amb[0].FoundByLookup)
	require.Equal(t, map[string]int{"resent": 2}, lostAnswers(t, b), "each lost call's attempt says it was sent again")
}
