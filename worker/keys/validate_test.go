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

// The constructors return Validate's error for a negative setting instead
// of running the default, or panicking.
func TestConstructorsRefuseNegatives(t *testing.T) {
	t.Parallel()
	_, err := keys.NewStore(nil, keys.StoreConfig{ProbeLease: -time.Second})
	require.EqualError(t, err, "keys: StoreConfig.ProbeLease must not be negative, got -1s (0 takes the default)")
	_, err = keys.NewAlerter(keys.AlerterConfig{QueueSize: -1})
	require.EqualError(t, err, "keys: AlerterConfig.QueueSize must not be negative, got -1 (0 takes the default)")
	_, err = keys.NewPacer(keys.PacerConfig{Recover: -time.Second})
	require.EqualError(t, err, "keys: PacerConfig.Recover must not be negative, got -1s (0 takes the default)")
	store := keys.DefaultStore(nil)
	_, err = keys.NewPacers(store, nil, keys.PacersConfig{Heartbeat: -time.Second})
	require.ErrorContains(t, err, "keys: PacersConfig.Heartbeat must not be negative")
	_, err = keys.NewSupervisor(store, nil, keys.SupervisorConfig{Tick: -time.Second})
	require.ErrorContains(t, err, "keys: SupervisorConfig.Tick must not be negative")
	_, err = store.NewGate(keys.GateConfig{Key: "k", ProbeInterval: time.Minute, Storm: keys.StormSettings{Window: -time.Second}})
	require.EqualError(t, err, "keys: gate of k: keys: StormSettings.Window must not be negative, got -1s (0 takes the default)")
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
