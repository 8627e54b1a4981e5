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
