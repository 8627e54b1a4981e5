package decide_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
)

func TestSuspect(t *testing.T) {
	t.Parallel()
	holds := []string{"rejection_streak", "throttle_wall"}
	for _, tc := range []struct {
		name   string
		v      classify.Verdict
		reason string
		want   string
	}{
		{"vendor rule", classify.Verdict{Class: classify.Rejected, Known: true, Rule: "openai/context_length_exceeded", DecidedBy: classify.DecidedByVendorRule}, "context_length", ""},
		{"user rule", classify.Verdict{Class: classify.Rejected, Known: true, Rule: "user/1", DecidedBy: classify.DecidedByUserRule}, "x", ""},
		{"phase", classify.Verdict{Class: classify.Ambiguous, Known: true, Rule: "phase/stream", DecidedBy: classify.DecidedByPhase}, "ambiguous_retries_exhausted", ""},
		{"signal layer", classify.Verdict{Class: classify.Rejected, Known: true, Rule: "signal/context_or_size", DecidedBy: classify.DecidedBySignal}, "signal_context_or_size", ledger.SuspectSignal},
		{"status alone", classify.Verdict{Class: classify.Rejected, Known: true, Rule: "generic/400", DecidedBy: classify.DecidedByStatus}, "bad_request", ledger.SuspectStatus},
		{"default", classify.Verdict{Class: classify.Rejected, Known: false, Rule: "default/unknown_4xx", DecidedBy: classify.DecidedByStatus}, "unknown_4xx", ledger.SuspectUnknown},
		{"safety net", classify.Verdict{Class: classify.Exhausted, Known: true, Rule: "openai/invalid_request", DecidedBy: classify.DecidedByVendorRule}, "rejection_streak", ledger.SuspectSafetyNet},
		{"no verdict", classify.Verdict{}, "cancelled", ""},
	} {
		require.Equal(t, tc.want, decide.Suspect(tc.v, tc.reason, holds...), tc.name)
	}
	require.Equal(t, ledger.SuspectSafetyNet, decide.SuspectSafetyNet)
}
