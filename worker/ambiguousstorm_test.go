package worker_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
)

// stormyRecordsEnv sets the stormy batch's record count. The default
// (stormyRecordsDefault) keeps `make test` quick under -race on a loaded
// machine (each policy's run takes 15-30 s there); `make stormy` runs the
// overnight batch at its full 600 records (a minute or more each).
const (
	stormyRecordsEnv     = "TRIAGE_STORMY_RECORDS"
	stormyRecordsDefault = 200
)

// stormy is one run of the stormy overnight batch: n records (600 in the
// issue that asked for it), 30 % of them
// poisoned (rejected with a 400), a rate limit that throttles the 16
// workers, an outage, a prepaid balance that runs out and is topped up
// once the key_exhausted alert is sent, and 3 % of calls that hang after
// the provider billed them, 2 s per attempt, the fake's Idempotency-Key
// replay off (as at every real provider).
type stormy struct {
	b        *testBundle
	n        int
	poisoned map[string]bool
	st       ledger.Status
	stats    fakeprovider.Stats
	// hung are the records with at least one call that hung.
	hung map[string]bool
	dls  map[string]ledger.DeadLetter
	amb  ledger.Ambiguity
}

func runStormy(t *testing.T, ambiguous string) stormy {
	t.Helper()
	n := stormyRecordsDefault
	if v := os.Getenv(stormyRecordsEnv); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, stormyRecordsEnv)
	}
	sc := fakeprovider.Scenario{
		Seed:     23,
		NoReplay: true,
		StoreLag: fakeprovider.Duration(150 * time.Millisecond),
		// A call costs about 15 micro-dollars: the balance runs out after
		// about a sixth of the records.
		Balance:   &fakeprovider.Balance{USD: float64(n) * 2.5e-6},
		RateLimit: &fakeprovider.RateLimit{RequestsPerMinute: 12000, BurstRequests: 24},
		Outages:   []fakeprovider.Outage{{FromRequest: n / 10, Requests: 12}},
		Poison:    fakeprovider.Poison{InvalidMarker: "POISON"},
		Random:    []fakeprovider.RandomFault{{P: 0.03, Action: fakeprovider.ActionHang}},
		// Two records hang on their first call whatever the draws (a short
		// run may draw few hangs).
		RecordScripts: map[string][]fakeprovider.Step{"r004": steps(act(fakeprovider.ActionHang)), "r008": steps(act(fakeprovider.ActionHang))},
	}
	// The storm breaker's probes back off to a second, not a minute, so
	// the outage costs the test a second or two.
	extra := "ambiguous = \"" + ambiguous + "\"\nstorm_probe_min = \"100ms\"\nstorm_probe_max = \"1s\"\n"
	if ambiguous == "lookup" {
		extra += "lookup_wait = \"20s\"\n"
	}
	b := setup(t, sc, tweaks{concurrency: 16, timeout: "2s", probeInterval: "300ms", extraKey: extra})
	s := stormy{b: b, n: n, poisoned: map[string]bool{}, hung: map[string]bool{}, dls: map[string]ledger.DeadLetter{}}
	recs := records(n, func(i int) string {
		if i%10 < 3 {
			return `,"note":"POISON"`
		}
		return ""
	})
	for i, r := range recs {
		if i%10 < 3 {
			s.poisoned[r.ID] = true
		}
	}
	b.enqueue(t, "storm", recs)
	b.start(t)

	eventually(t, 120*time.Second, "the balance runs out (key_exhausted)", func() bool { return b.hooks.count("key_exhausted") >= 1 })
	b.fake.TopUp(1)
	s.st = b.waitSettled(t, "storm", 180*time.Second)
	s.stats = b.fake.Stats()
	for id, r := range s.stats.ByRecord {
		for _, a := range r.Actions {
			if a == fakeprovider.ActionHang {
				s.hung[id] = true
			}
		}
	}
	require.NotEmpty(t, s.hung, "the storm hung some calls")
	for _, d := range b.deadLetters(t, "storm") {
		s.dls[d.RecordID] = d
	}
	amb, err := ledger.AmbiguityByKey(context.Background(), b.db.Pool, ledger.AttemptFilter{Batch: "storm"})
	require.NoError(t, err)
	require.Len(t, amb, 1)
	s.amb = amb[0]

	// What holds under every policy: no poisoned record is resent after its
	// 400, and no good record is dead-lettered as rejected.
	for id, r := range s.stats.ByRecord {
		if !s.poisoned[id] {
			continue
		}
		require.Zero(t, r.Billed, "%s: a poisoned record is never billed", id)
		require.Equal(t, 1, count(r.Statuses, 400), "%s: one 400, never resent: %v", id, r.Statuses)
	}
	for id := range s.poisoned {
		require.Equal(t, classify.Rejected.String(), s.dls[id].Class, "%s", id)
	}
	t.Logf("%s: %d records, %d requests, %d billed calls, %d hung records, %d billed twice, %d completed, %d dead-lettered, %d look-ups",
		ambiguous, n, s.stats.Requests, s.stats.BilledCalls, len(s.hung), s.stats.DoubleBilledRecords, s.st.Completed, s.st.DeadLettered, s.stats.StoreLookups)
	return s
}

func count(xs []int, x int) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// The stormy batch with ambiguous = "lookup": every lost call is found in
// the provider's store, nothing is billed twice, every good record
// completes, and the ledger's spend is the provider's bill.
func TestStormyBatchLookupNeverBillsTwice(t *testing.T) {
	t.Parallel()
	s := runStormy(t, "lookup")
	require.Zero(t, s.stats.DoubleBilledRecords, "records billed twice")
	require.Equal(t, s.n-len(s.poisoned), s.st.Completed, "every good record completed; dead letters: %v", s.dls)
	require.Equal(t, len(s.poisoned), s.st.DeadLettered)
	for id := range s.hung {
		require.Equal(t, 1, s.stats.ByRecord[id].Billed, "%s: the hung call was looked up, not resent", id)
	}
	require.Zero(t, s.st.PossiblyBilledUSD, "every lost answer was found")
	require.InDelta(t, s.stats.BilledUSD, s.st.SpendUSD, 1e-9, "the ledger equals the provider's bill")
	require.GreaterOrEqual(t, s.amb.FoundByLookup, len(s.hung), "each hung call found by look-up")
	require.Zero(t, s.amb.PossiblyDoubleBilled)
	lost := lostAnswers(t, s.b)
	require.Equal(t, s.amb.FoundByLookup, lost["found"], "each found call's attempt says so: %v", lost)
	require.Zero(t, lost["resent"]+lost["dead_lettered"]+lost["unknown"], "%v", lost)
}

// The stormy batch with ambiguous = "dead_letter": nothing is billed twice;
// every record with a lost call is dead-lettered ambiguous_unresolved with
// its one billed attempt, every other good record completes.
func TestStormyBatchDeadLetterNeverBillsTwice(t *testing.T) {
	t.Parallel()
	s := runStormy(t, "dead_letter")
	require.Zero(t, s.stats.DoubleBilledRecords, "records billed twice")
	unresolved := 0
	for id, d := range s.dls {
		if s.poisoned[id] {
			continue
		}
		require.Equal(t, classify.Ambiguous.String(), d.Class, "%s: %+v", id, d)
		require.Equal(t, decide.ReasonAmbiguousUnresolved, d.Reason, id)
		require.Equal(t, 1, s.stats.ByRecord[id].Billed, "%s: billed once, never resent", id)
		require.Positive(t, d.Attempts, id)
		unresolved++
	}
	for id := range s.hung {
		require.Equal(t, decide.ReasonAmbiguousUnresolved, s.dls[id].Reason, "%s: a hung record is dead-lettered as ambiguous", id)
	}
	require.Equal(t, s.n-len(s.poisoned)-unresolved, s.st.Completed, "every other good record completed")
	require.Equal(t, unresolved, s.amb.Unanswered, "each unresolved record has its one lost attempt")
	require.Zero(t, s.amb.PossiblyDoubleBilled)
	require.Equal(t, map[string]int{"dead_lettered": unresolved}, lostAnswers(t, s.b), "each lost attempt says it was dead-lettered")
}

// The stormy batch with ambiguous = "retry": a lost call is resent and,
// replay off, billed twice; the ledger counts every such record, it does
// not hide one.
func TestStormyBatchRetryCountsTheDoubleBills(t *testing.T) {
	t.Parallel()
	s := runStormy(t, "retry")
	require.Positive(t, s.stats.DoubleBilledRecords, "replay off: a resent hung call is billed again")
	// The ledger never hides a double bill. It may count one the provider
	// did not make: a lost call whose request timed out before the provider
	// billed it (a loaded machine widens that window: 7 counted against 6
	// billed twice at load 25) is, to the ledger, a lost answer like any
	// other, resent and counted; each such record billed fewer times than
	// the ledger's calls that may have been billed explains one.
	unbilled := lostButNotBilled(t, s.b, "storm", s.stats)
	require.GreaterOrEqual(t, s.amb.PossiblyDoubleBilled, s.stats.DoubleBilledRecords, "the ledger reports every double bill as a number")
	require.LessOrEqual(t, s.amb.PossiblyDoubleBilled, s.stats.DoubleBilledRecords+unbilled,
		"the ledger counts no double bill beyond the lost calls the provider did not bill (%d)", unbilled)
	require.Positive(t, s.st.PossiblyBilledUSD, "the lost bills are in the ledger as possibly billed")
	require.Zero(t, s.amb.FoundByLookup)
	lost := lostAnswers(t, s.b)
	require.Zero(t, lost["found"])
	require.GreaterOrEqual(t, lost["resent"], s.stats.DoubleBilledRecords, "every second bill follows a resent lost answer: %v", lost)
}

// lostButNotBilled counts the records of batch with a lost call (an intent
// or possibly billed attempt) that the provider billed fewer times than
// the ledger has calls that may have been billed.
func lostButNotBilled(t *testing.T, b *testBundle, batch string, stats fakeprovider.Stats) int {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT record_id,
			count(*) FILTER (WHERE status IN ('ok', 'possibly_billed', 'intent'))::int
		FROM triage_attempt WHERE batch = $1 AND mode <> 'batch'
		GROUP BY record_id HAVING count(*) FILTER (WHERE status IN ('possibly_billed', 'intent')) > 0`, batch)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			id    string
			calls int
		)
		require.NoError(t, rows.Scan(&id, &calls))
		if got := stats.ByRecord[id].Billed; got < calls {
			t.Logf("record %s: %d calls in the ledger that may have been billed, %d billed by the provider", id, calls, got)
			n++
		}
	}
	require.NoError(t, rows.Err())
	return n
}
