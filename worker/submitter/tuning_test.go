package submitter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A negative setting is refused with its name, not run as the default.
func TestTuningValidateRefusesNegatives(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		t    Tuning
		want string // "" valid
	}{
		{"zero takes the defaults", Tuning{}, ""},
		{"set", Tuning{Tick: time.Second, Gather: time.Minute, PollMin: time.Second, PollMax: time.Hour, Lease: time.Minute, MaxLines: 10, MaxRefusals: 3}, ""},
		{"tick", Tuning{Tick: -time.Second}, "Tuning.Tick must not be negative, got -1s"},
		{"gather", Tuning{Gather: -time.Second}, "Tuning.Gather must not be negative"},
		{"poll min", Tuning{PollMin: -time.Second}, "Tuning.PollMin must not be negative"},
		{"poll max", Tuning{PollMax: -time.Second}, "Tuning.PollMax must not be negative"},
		{"lease", Tuning{Lease: -time.Second}, "Tuning.Lease must not be negative"},
		{"max lines", Tuning{MaxLines: -1}, "Tuning.MaxLines must not be negative, got -1"},
		{"max refusals", Tuning{MaxRefusals: -2}, "Tuning.MaxRefusals must not be negative, got -2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.t.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}
