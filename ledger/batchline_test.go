package ledger_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
)

// The open-line rule for a requeue: only a paid answer whose job is gone
// goes with the record's new job; a line the provider still runs, or an
// answer its own job can still apply, refuses the requeue.
func TestRecordLineOnRequeue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		state   string
		jobLive bool
		want    ledger.RequeueLine
	}{
		{ledger.LineSubmitted, false, ledger.RequeueRefused},
		{ledger.LineSubmitted, true, ledger.RequeueRefused},
		{ledger.LineAnswered, true, ledger.RequeueRefused},
		{ledger.LineAnswered, false, ledger.RequeueAdopt},
	} {
		got := ledger.RecordLine{State: tc.state}.OnRequeue(tc.jobLive)
		require.Equal(t, tc.want, got, "%s, job live %v", tc.state, tc.jobLive)
	}
}
