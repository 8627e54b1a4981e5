package enqueue

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// The filter never forgets an id, says "maybe" rarely for ids it never saw,
// and stays within its bound however many ids it takes.
func TestIDFilter(t *testing.T) {
	t.Parallel()
	f := newIDFilter()
	const n = 200_000
	for i := range n {
		f.add("seen-" + strconv.Itoa(i))
	}
	for i := range n {
		require.True(t, f.mayContain("seen-"+strconv.Itoa(i)), "id %d forgotten", i)
	}
	maybes := 0
	for i := range n {
		if f.mayContain("never-" + strconv.Itoa(i)) {
			maybes++
		}
	}
	require.Less(t, maybes, n/100, "false maybes")
	require.LessOrEqual(t, f.bytes, idFilterMaxBytes)
	require.Less(t, f.bytes, 1<<20, "grows with the ids: 200,000 ids take well under 1 MiB")
}
