package ledger_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
)

// A dead letter whose class came from weak evidence keeps why it is
// suspect; the listing filters on it, the JSON shows it, and the safety
// net can mark dead letters suspect after the fact.
func TestDeadLetterSuspect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sure := deadLetterRow("b1", "r1")
	sure.Rule = "openai/context_length_exceeded"
	weak := deadLetterRow("b1", "r2")
	weak.Rule, weak.Suspect = "signal/context_or_size", ledger.SuspectSignal
	later := deadLetterRow("b2", "r3")
	later.Rule = "openai/invalid_request"
	ids := b.deadLetters(t, sure, weak, later)

	only, err := ledger.ListDeadLetters(b.ctx, b.db.Pool, ledger.DeadLetterFilter{Suspect: true})
	require.NoError(t, err)
	require.Len(t, only, 1)
	require.Equal(t, "r2", only[0].RecordID)
	require.Equal(t, ledger.SuspectSignal, only[0].Suspect)

	// The safety net marks the dead letters of a held fingerprint; one
	// already suspect keeps its first reason.
	n, err := ledger.MarkSuspect(b.ctx, b.db.Pool, []int64{ids[1], ids[2]}, ledger.SuspectSafetyNet)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	only, err = ledger.ListDeadLetters(b.ctx, b.db.Pool, ledger.DeadLetterFilter{Suspect: true})
	require.NoError(t, err)
	require.Len(t, only, 2)
	require.Equal(t, ledger.SuspectSignal, only[0].Suspect)
	require.Equal(t, ledger.SuspectSafetyNet, only[1].Suspect)

	// The list shape and the detail shape both say it; a sure one says null.
	items, err := json.Marshal([]ledger.DeadLetterListItem{only[0].ListItem()})
	require.NoError(t, err)
	require.Contains(t, string(items), `"suspect":"signal"`)
	d, err := ledger.GetDeadLetter(b.ctx, b.db.Pool, ids[0])
	require.NoError(t, err)
	out, err := json.Marshal(d)
	require.NoError(t, err)
	require.Contains(t, string(out), `"suspect":null`)
}
