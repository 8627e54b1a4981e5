package worker_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/workertest"
)

// A key's rpm and tpm in triage.toml are the limits its pacer starts at,
// fleet-wide, instead of the slow start's guess.
func TestKeyRPMSeedsThePacer(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{}, tweaks{extraKey: "rpm = 600\ntpm = 120000\n"})
	rt := b.newRuntime(t)
	st, ok := rt.Pacing(workertest.Key)
	require.True(t, ok)
	require.Equal(t, keys.PaceConfigured, st.Source)
	require.InDelta(t, 10*keys.PacerHeadroomDefault, st.FleetRate, 1e-9, "600 a minute is 10 a second, less the headroom")
	require.InDelta(t, 2000*keys.PacerHeadroomDefault, st.FleetTokens, 1e-9)

	plain := setup(t, fakeprovider.Scenario{}, tweaks{})
	st, _ = plain.newRuntime(t).Pacing(workertest.Key)
	require.Equal(t, keys.PaceStarting, st.Source, "without them: the slow start")
}
