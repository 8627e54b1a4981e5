package settled

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
)

// The batch_settled alert says how the batch settled and carries its
// counts and spend as `triage status B --json` gives them.
func TestAlert(t *testing.T) {
	t.Parallel()
	st := ledger.Status{Batch: "b", Key: "main", Pipeline: "p", Total: 10, Completed: 8, DeadLettered: 2, SpendUSD: 0.5}
	a := Alert(ledger.SettleClaim{Batch: "b"}, st)
	require.Equal(t, keys.AlertBatchSettled, a.Kind)
	require.True(t, a.Info)
	require.Equal(t, "main", a.Key)
	require.Equal(t, "b", a.Batch)
	require.Equal(t, "batch settled: 8 of 10 records completed, 2 dead-lettered, $0.5000 spent", a.Message)
	require.Equal(t, 2, a.Fields["dead_lettered"])

	byHand := Alert(ledger.SettleClaim{Batch: "b", CancelledByHand: true}, st)
	require.Contains(t, byHand.Message, "batch settled after a cancel by hand")
	require.Equal(t, true, byHand.Fields["cancelled_by_hand"])
}
