package keys_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/worker/keys"
)

// A negative setting is refused with its config and field, not run as the
// default; a zero takes the default.
func TestConfigsRefuseNegatives(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want string // "" valid
	}{
		{"store zero", keys.StoreConfig{}.Validate(), ""},
		{"store probe lease", keys.StoreConfig{ProbeLease: -time.Second}.Validate(), "StoreConfig.ProbeLease must not be negative, got -1s"},
		{"store probe attempts left", keys.StoreConfig{ProbeAttemptsLeft: -1}.Validate(), "StoreConfig.ProbeAttemptsLeft must not be negative"},
		{"store probe max age", keys.StoreConfig{ProbeMaxAge: -time.Hour}.Validate(), "StoreConfig.ProbeMaxAge must not be negative"},
		{"supervisor zero", keys.SupervisorConfig{}.Validate(), ""},
		{"supervisor tick", keys.SupervisorConfig{Tick: -time.Millisecond}.Validate(), "SupervisorConfig.Tick must not be negative"},
		{"pacers zero", keys.PacersConfig{}.Validate(), ""},
		{"pacers heartbeat", keys.PacersConfig{Heartbeat: -time.Second}.Validate(), "PacersConfig.Heartbeat must not be negative"},
		{"pacers record every", keys.PacersConfig{RecordEvery: -time.Second}.Validate(), "PacersConfig.RecordEvery must not be negative"},
		{"alerter zero", keys.AlerterConfig{}.Validate(), ""},
		{"alerter webhook timeout", keys.AlerterConfig{WebhookTimeout: -time.Second}.Validate(), "AlerterConfig.WebhookTimeout must not be negative"},
		{"alerter queue size", keys.AlerterConfig{QueueSize: -1}.Validate(), "AlerterConfig.QueueSize must not be negative, got -1"},
		{"storm zero", keys.StormSettings{}.Validate(), ""},
		{"storm never by a run or a share", keys.StormSettings{Failures: -1, Share: -1}.Validate(), ""},
		{"storm min calls", keys.StormSettings{MinCalls: -1}.Validate(), "StormSettings.MinCalls must not be negative"},
		{"storm window", keys.StormSettings{Window: -time.Second}.Validate(), "StormSettings.Window must not be negative"},
		{"storm probe min", keys.StormSettings{ProbeMin: -time.Second}.Validate(), "StormSettings.ProbeMin must not be negative"},
		{"storm probe max", keys.StormSettings{ProbeMax: -time.Second}.Validate(), "StormSettings.ProbeMax must not be negative"},
		{"pacer zero", keys.PacerConfig{}.Validate(), ""},
		{"pacer initial rate", keys.PacerConfig{InitialRate: -1}.Validate(), "PacerConfig.InitialRate must not be negative"},
		{"pacer probe", keys.PacerConfig{Probe: -0.5}.Validate(), "PacerConfig.Probe must not be negative"},
		{"pacer recover", keys.PacerConfig{Recover: -time.Second}.Validate(), "PacerConfig.Recover must not be negative"},
		{"pacer known rate", keys.PacerConfig{KnownRate: -2}.Validate(), "PacerConfig.KnownRate must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.want == "" {
				require.NoError(t, tc.err)
				return
			}
			require.ErrorContains(t, tc.err, tc.want)
		})
	}
}

// The constructors cannot return an error: given a config Validate
// refuses they panic with its error instead of running the default.
func TestConstructorsRefuseNegatives(t *testing.T) {
	t.Parallel()
	require.PanicsWithError(t, "keys: StoreConfig.ProbeLease must not be negative, got -1s (0 takes the default)", func() {
		keys.NewStore(nil, keys.StoreConfig{ProbeLease: -time.Second})
	})
	require.PanicsWithError(t, "keys: AlerterConfig.QueueSize must not be negative, got -1 (0 takes the default)", func() {
		keys.NewAlerter(keys.AlerterConfig{QueueSize: -1})
	})
	require.PanicsWithError(t, "keys: PacerConfig.Recover must not be negative, got -1s (0 takes the default)", func() {
		keys.NewPacer(keys.PacerConfig{Recover: -time.Second})
	})
}

func TestConfigsWithDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, keys.ProbeLeaseDefault, keys.StoreConfig{}.WithDefaults().ProbeLease)
	require.Equal(t, keys.SupervisorTickDefault, keys.SupervisorConfig{}.WithDefaults().Tick)
	require.Equal(t, keys.PacerHeartbeatDefault, keys.PacersConfig{}.WithDefaults().Heartbeat)
	require.Equal(t, keys.PaceRecordEveryDefault, keys.PacersConfig{}.WithDefaults().RecordEvery)
	require.Equal(t, keys.AlertQueueSizeDefault, keys.AlerterConfig{}.WithDefaults().QueueSize)
	require.Equal(t, keys.AlertWebhookTimeoutDefault, keys.AlerterConfig{}.WithDefaults().WebhookTimeout)
	st := keys.StormSettings{}.WithDefaults()
	require.Equal(t, keys.StormWindowDefault, st.Window)
	require.Equal(t, keys.StormMinCallsDefault, st.MinCalls)
	require.Equal(t, keys.PacerInitialRateDefault, keys.PacerConfig{}.WithDefaults().InitialRate)
}
