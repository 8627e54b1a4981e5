package ledger_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
)

func TestDeadLetterKeepsItsRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	known := deadLetterRow("b1", "r1")
	known.Rule = "anthropic/credit_balance_too_low"
	unknown := deadLetterRow("b1", "r2")
	unknown.Rule, unknown.Unknown = "default/unknown_4xx", true
	b.deadLetters(t, known, unknown)

	all, err := ledger.ListDeadLetters(b.ctx, b.db.Pool, ledger.DeadLetterFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, all, 2)

	only, err := ledger.ListDeadLetters(b.ctx, b.db.Pool, ledger.DeadLetterFilter{Batch: "b1", Unknown: true})
	require.NoError(t, err)
	require.Len(t, only, 1)
	require.Equal(t, "r2", only[0].RecordID)
	require.Equal(t, "default/unknown_4xx", only[0].Rule)

	d, err := ledger.GetDeadLetter(b.ctx, b.db.Pool, all[0].ID)
	require.NoError(t, err)
	out, err := json.Marshal(d)
	require.NoError(t, err)
	var shown map[string]any
	require.NoError(t, json.Unmarshal(out, &shown))
	require.Equal(t, "anthropic/credit_balance_too_low", shown["rule"])
	require.Equal(t, true, shown["known"])
}
