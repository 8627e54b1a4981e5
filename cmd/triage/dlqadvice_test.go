package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/operator"
)

// The advice `triage dlq show` and `dlq list` print before the requeue
// command fits the dead letter's cause: a cancelled record, a key that
// cannot pay, a throttled one and an unusable answer each say their own
// thing, and only a pipeline fault says "after fixing the pipeline".
func TestDLQAdviceFitsTheCause(t *testing.T) {
	t.Parallel()
	cases := []struct {
		class, reason string
		want          string
	}{
		{"rejected", "cancelled", "cancelled by hand"},
		{"exhausted", "invalid_api_key", "fixing the key"},
		{"exhausted", "insufficient_quota", "out of credit"},
		{"throttled", "snoozed_out", "rate limit"},
		{"ok", "invalid_output", "output contract"},
		{"ambiguous", "ambiguous_unresolved", "may pay twice"},
		{"rejected", "template_error", "after fixing the pipeline"},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			dl := ledger.DeadLetter{ID: 7, Batch: "b1", RecordID: "r1", Class: c.class, Reason: c.reason, CreatedAt: time.Now()}
			var show bytes.Buffer
			writeDLQShow(&show, operator.DeadLetterDetail{DeadLetter: dl})
			require.Contains(t, show.String(), c.want)
			require.Contains(t, show.String(), "triage dlq requeue 7")
			var list bytes.Buffer
			writeDLQList(&list, []ledger.DeadLetter{dl})
			require.Contains(t, list.String(), c.want)
			if c.reason != "template_error" {
				require.NotContains(t, show.String(), "after fixing the pipeline")
				require.NotContains(t, list.String(), "after fixing the pipeline")
			}
		})
	}
}
