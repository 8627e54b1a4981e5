package worker_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

// A dead letter whose class came from weak evidence (the signal layer, the
// status alone) is marked suspect, and says why; one a vendor rule decided
// is not.
func TestDeadLetterMarkedSuspectByWeakVerdict(t *testing.T) {
	t.Parallel()
	weak := fakeprovider.Step{Status: 400, Body: json.RawMessage(
		`{"error":{"message":"Input data may contain inappropriate content.","code":"dif_1185"}}`)}
	sc := fakeprovider.Scenario{NoReplay: true, Poison: fakeprovider.Poison{ContextTokens: 2000},
		RecordScripts: map[string][]fakeprovider.Step{"r001": {weak}}}
	b := setup(t, sc, tweaks{concurrency: 2})
	b.enqueue(t, "b1", records(4, func(i int) string {
		if i == 2 {
			return `,"note":"` + strings.Repeat("far too long for the model ", 1500) + `"`
		}
		return ""
	}))
	b.start(t)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 2, st.DeadLettered)
	byRecord := map[string]ledger.DeadLetter{}
	for _, dl := range b.deadLetters(t, "b1") {
		byRecord[dl.RecordID] = dl
	}
	require.Equal(t, ledger.SuspectSignal, byRecord["r001"].Suspect, "decided by the signal layer: %+v", byRecord["r001"])
	require.Empty(t, byRecord["r002"].Suspect, "a vendor rule's context_length is sure: %+v", byRecord["r002"])
}
