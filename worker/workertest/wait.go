package workertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
)

// pollInterval is how often Eventually checks its condition.
const pollInterval = 10 * time.Millisecond

// Eventually checks cond every 10 ms until it holds, and fails the test
// with msg if it still does not once timeout has passed. cond runs on the
// test's goroutine, so it may use require.
func Eventually(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", timeout, msg)
		}
		<-tick.C
	}
}

// WaitSettled waits until every record of batch is completed or
// dead-lettered, and returns the batch's status then.
func WaitSettled(t testing.TB, db ledger.DBTX, batch string, timeout time.Duration) ledger.Status {
	t.Helper()
	var st ledger.Status
	Eventually(t, timeout, "batch "+batch+" settles", func() bool {
		var err error
		st, err = ledger.BatchStatus(context.Background(), db, batch)
		require.NoError(t, err)
		return st.Completed+st.DeadLettered == st.Total
	})
	return st
}

// WaitDrained waits until every record of batch is completed or
// dead-lettered for as long as the batch keeps moving: it fails the test
// once no record has settled for stall. A drain's length is the machine's
// (hundreds of records take seconds, or tens of seconds on a loaded one);
// a batch that stops settling is the fault to catch.
func WaitDrained(t testing.TB, db ledger.DBTX, batch string, stall time.Duration) ledger.Status {
	t.Helper()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	settled, since := -1, time.Now()
	for {
		st, err := ledger.BatchStatus(context.Background(), db, batch)
		require.NoError(t, err)
		if st.Completed+st.DeadLettered == st.Total {
			return st
		}
		if n := st.Completed + st.DeadLettered; n != settled {
			settled, since = n, time.Now()
		} else if time.Since(since) > stall {
			t.Fatalf("batch %s stopped settling: %d of %d records settled, none for %s", batch, n, st.Total, stall)
		}
		<-tick.C
	}
}
