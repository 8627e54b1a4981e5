package jobrun

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
)

func TestJobChangeRoundTrip(t *testing.T) {
	t.Parallel()
	require.True(t, jobChange([]byte(`{"snoozes":2}`)).IsZero())
	ch := jobChange([]byte(`{"triage_change":{"max_field_chars":120,"drop_json":true}}`))
	require.Equal(t, decide.Change{MaxFieldChars: 120, DropJSON: true}, ch)
	require.Equal(t, "truncated+dropped_json_mode", changeLabel(ch))
	require.True(t, ledger.Truncated(changeLabel(ch)))
	require.False(t, ledger.Truncated(changeLabel(decide.Change{DropJSON: true})))
}
