package jobrun

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
)

// TestLineHold pins which line states hold a record.
func TestLineHold(t *testing.T) {
	t.Parallel()
	for state, want := range map[string]ledger.LineHold{
		ledger.LinePending: ledger.HoldUnsent, ledger.LineNotRun: ledger.HoldUnsent,
		ledger.LineSubmitted: ledger.HoldLive, ledger.LineAnswered: ledger.HoldAnswered, ledger.LineApplied: ledger.HoldNone,
	} {
		require.Equal(t, want, ledger.BatchLine{ID: 1, State: state}.Hold(), state)
	}
	require.Equal(t, ledger.HoldNone, ledger.BatchLine{State: ledger.LineSubmitted}.Hold(), "no line")
}
