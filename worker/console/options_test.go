package console

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/worker/decide"
)

// A negative option is refused with its name, not served as the default;
// a zero takes the default.
func TestOptionsRefuseNegatives(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{}, "console: Options.Pool is required"},
		{Options{Pool: &pgxpool.Pool{}, Refresh: -time.Second}, "console: Options.Refresh must not be negative, got -1s"},
		{Options{Pool: &pgxpool.Pool{}, RetryBudget: decide.RetryBudget{Floor: -2}}, "console: Options.RetryBudget.Floor must not be negative, got -2"},
	} {
		s, err := New(tc.opts)
		require.ErrorContains(t, err, tc.want)
		require.Nil(t, s)
	}
	o := Options{}.WithDefaults()
	require.Equal(t, RefreshDefault, o.Refresh)
	require.Equal(t, decide.RetryBudgetDefault, o.RetryBudget)
	require.NotNil(t, o.Logger)
}
