package ledger

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger/dbtest"
)

// An amount sent as usdArg's text is the numeric pgx's binary encoding of
// the float64 made: the same value at the same scale, so a spend, an
// estimate or a reservation reads back to the cent as it did.
func TestUSDArgIsTheNumericOfTheFloat(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	for _, f := range []float64{0, 0.1 + 0.2, 1e-7, 3.1e-05, 0.000150, 12000, 123456.789, 1e20, 5e-324,
		math.MaxFloat64 / 1e290, math.Copysign(0, -1), -0.25, 2.5e-3 * 3} {
		var binary, text string
		var back float64
		require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT $1::numeric::text, $2::numeric::text, $2::numeric::float8`,
			f, usdArg(f)).Scan(&binary, &text, &back), "%v", f)
		require.Equal(t, binary, text, "%v", f)
		require.Equal(t, f == 0, back == 0, "%v", f)
		if f != 0 {
			require.Equal(t, f, back, "%v", f)
		}
	}
	var null *string
	require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT $1::numeric::text`, nullUSDArg(nil)).Scan(&null))
	require.Nil(t, null)
}
