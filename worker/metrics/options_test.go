package metrics_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/metrics"
)

// A negative option is refused with its name, not run as the default; a
// zero takes the default.
func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts metrics.Options
		want string
	}{
		{"negative health timeout", metrics.Options{HealthTimeout: -time.Second}, "Options.HealthTimeout must not be negative"},
		{"negative scrape timeout", metrics.Options{ScrapeTimeout: -1}, "Options.ScrapeTimeout must not be negative"},
		{"negative shutdown timeout", metrics.Options{ShutdownTimeout: -time.Minute}, "Options.ShutdownTimeout must not be negative"},
		{"negative retry window", metrics.Options{RetryBudget: decide.RetryBudget{Window: -time.Minute, Floor: 1}}, "Options.RetryBudget.Window must not be negative"},
		{"negative retry floor", metrics.Options{RetryBudget: decide.RetryBudget{Window: time.Minute, Floor: -1}}, "Options.RetryBudget.Floor must not be negative"},
		{"buckets not increasing", metrics.Options{DurationBuckets: []float64{1, 1}}, "Options.DurationBuckets must increase"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := metrics.New(nil, nil, tc.opts)
			require.ErrorContains(t, err, tc.want)
			require.Nil(t, m)
		})
	}
}

func TestOptionsWithDefaults(t *testing.T) {
	t.Parallel()
	o := metrics.Options{}.WithDefaults()
	require.Equal(t, metrics.HealthTimeoutDefault, o.HealthTimeout)
	require.Equal(t, metrics.ScrapeTimeoutDefault, o.ScrapeTimeout)
	require.Equal(t, metrics.ShutdownTimeoutDefault, o.ShutdownTimeout)
	require.Equal(t, decide.RetryBudgetDefault, o.RetryBudget)
	require.NotEmpty(t, o.DurationBuckets)
	require.NotNil(t, o.Logger)
	// A negative value is left for New to refuse.
	require.Equal(t, -time.Second, metrics.Options{HealthTimeout: -time.Second}.WithDefaults().HealthTimeout)
}
