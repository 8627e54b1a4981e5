package worker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// TestGroupCommitSettlesAnswersThatPileUpTogether: answers that arrive
// while another job's answer is being committed wait for that commit and
// then settle in one transaction; every record ends with its result, its
// attempt and its completed job, and the ledger equals the bill. With
// every group's transaction made to fail, each of its jobs commits alone:
// one job's failure is never another's, and nothing is lost.
func TestGroupCommitSettlesAnswersThatPileUpTogether(t *testing.T) {
	t.Parallel()
	for _, failGroups := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail_groups=%v", failGroups), func(t *testing.T) {
			t.Parallel()
			const n = 8
			b := setup(t, fakeprovider.Scenario{NoReplay: true}, tweaks{concurrency: n})
			rt := b.newRuntime(t)
			// The first answer's commit is held until the seven others
			// wait behind it: they are the next group.
			var (
				mu      sync.Mutex
				sizes   []int
				others  = make(chan struct{})
				release sync.Once
			)
			rt.SetGroupHooks(func(waiting int) {
				if waiting == n-1 {
					release.Do(func() { close(others) })
				}
			}, func(size int) {
				mu.Lock()
				first := len(sizes) == 0
				sizes = append(sizes, size)
				mu.Unlock()
				if first {
					select {
					case <-others:
					case <-time.After(time.Minute):
						t.Error("the other answers never piled up behind the first commit")
					}
				}
			}, failGroups)
			b.run(t, rt)
			b.enqueue(t, "g", records(n, nil))
			st := b.waitSettled(t, "g", time.Minute)
			require.Equal(t, n, st.Completed, "%+v", st)
			require.Zero(t, st.DeadLettered)

			mu.Lock()
			require.Equal(t, []int{1, n - 1}, sizes, "one answer alone, then the seven that waited for its commit")
			mu.Unlock()
			stats := b.fake.Stats()
			require.Equal(t, n, stats.Requests, "one call per record")
			require.InDelta(t, stats.BilledUSD, st.SpendUSD, 1e-9, "the ledger equals the provider's bill")
			require.Zero(t, st.PossiblyBilledUSD)
			require.Equal(t, map[string]int{"completed": n}, b.jobStates(t), "every job completed with its answer")
			var results, ok int
			require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT
				(SELECT count(*) FROM triage_result WHERE batch = 'g'),
				(SELECT count(*) FROM triage_attempt WHERE batch = 'g' AND status = 'ok')`).Scan(&results, &ok))
			require.Equal(t, n, results, "a result per record")
			require.Equal(t, n, ok, "an answered attempt per record")
		})
	}
}
