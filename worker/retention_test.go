package worker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// Issue 19 fault 13: once a batch line's outcome is applied (the result or
// the dead letter stored with it), the line keeps neither the rendered
// request nor the provider's answer: a million-record night does not keep
// every body twice.
func TestFinishedBatchLinesKeepNoBodyOrAnswer(t *testing.T) {
	t.Parallel()
	b, _ := setupBatch(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, "batch", tweaks{concurrency: 4})
	const n = 40
	b.enqueue(t, "b1", records(n, poisoned(10)))
	b.start(t)
	st := b.waitSettled(t, "b1", 60*time.Second)
	require.Equal(t, n-n/10, st.Completed)
	require.Equal(t, n/10, st.DeadLettered)
	require.Equal(t, map[string]int{"applied": n}, b.lineStates(t))
	require.Equal(t, map[string]int{}, b.countBy(t, `SELECT state, count(*) FROM triage_provider_batch_line
		WHERE body <> 'null'::jsonb OR observation IS NOT NULL GROUP BY 1`), "finished lines that still hold a body or an answer")
	require.Equal(t, map[string]int{"completed": n - n/10}, b.countBy(t, `SELECT 'completed', count(*) FROM triage_result r
		WHERE r.batch = 'b1' GROUP BY 1`), "the answers live on in the results")
}
