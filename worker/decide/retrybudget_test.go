package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Zero fields take the defaults, one by one; a negative one is left for
// Validate, which names it.
func TestRetryBudgetWithDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, RetryBudgetDefault, RetryBudget{}.WithDefaults())
	require.Equal(t, RetryBudget{Window: 5 * time.Minute, Floor: RetryFloorDefault}, RetryBudget{Window: 5 * time.Minute}.WithDefaults())
	require.Equal(t, RetryBudget{Window: RetryWindowDefault, Floor: 3}, RetryBudget{Floor: 3}.WithDefaults())
	require.NoError(t, RetryBudgetDefault.Validate())
	require.EqualError(t, RetryBudget{Window: -time.Second}.WithDefaults().Validate(),
		"RetryBudget.Window must not be negative, got -1s (0 takes the default)")
	require.EqualError(t, RetryBudget{Floor: -1}.WithDefaults().Validate(),
		"RetryBudget.Floor must not be negative, got -1 (0 takes the default)")
}
