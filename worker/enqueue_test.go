package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/workertest"
)

// jsonlLines is n records "r1".."rn" as JSONL, with line i (1-based)
// replaced by override(i) when it returns a non-empty string.
func jsonlLines(n int, override func(i int) string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		line := ""
		if override != nil {
			line = override(i)
		}
		if line == "" {
			line = fmt.Sprintf(`{"id":"r%d","name":"name %d"}`, i, i)
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func enqueueJSONL(t *testing.T, tb *testBundle, batch, in string) (int, error) {
	t.Helper()
	return enqueue.JSONL(context.Background(), tb.db.Pool, tb.db.Schema, tb.cfg,
		enqueue.Params{Pipeline: workertest.Pipeline, Batch: batch, File: "in.jsonl"}, strings.NewReader(in))
}

// A streamed enqueue spans many chunks (each written in the open
// transaction), yet a bad line in the last one still queues nothing, and a
// record id used again far from its first use is refused naming both lines.
func TestEnqueueJSONLAllOrNothingAcrossChunks(t *testing.T) {
	t.Parallel()
	tb := setup(t, fakeprovider.Scenario{}, tweaks{})
	const n = 12_000 // two chunks
	nothingWritten := func() {
		t.Helper()
		require.Equal(t, map[string]int{}, tb.jobStates(t), "no job queued")
		require.Equal(t, map[string]int{}, tb.countBy(t, "SELECT batch, count(*) FROM triage_record GROUP BY 1"), "no record stored")
		require.Equal(t, map[string]int{}, tb.countBy(t, "SELECT id, count(*) FROM triage_batch GROUP BY 1"), "no batch")
	}

	_, err := enqueueJSONL(t, tb, "bad-last", jsonlLines(n, func(i int) string {
		if i == n {
			return `{"id":"r-last",`
		}
		return ""
	}))
	var le *enqueue.LineError
	require.True(t, errors.As(err, &le), "%v", err)
	require.Equal(t, n, le.Line)
	require.Contains(t, err.Error(), fmt.Sprintf("in.jsonl:%d: invalid JSON", n))
	nothingWritten()

	_, err = enqueueJSONL(t, tb, "dup-far", jsonlLines(n, func(i int) string {
		if i == n-3 {
			return `{"id":"r7","name":"again"}`
		}
		return ""
	}))
	require.True(t, errors.As(err, &le), "%v", err)
	require.Equal(t, n-3, le.Line)
	require.Contains(t, err.Error(), fmt.Sprintf(`in.jsonl:%d: record id "r7" already used on line 7`, n-3))
	nothingWritten()

	// The first bad line wins: a duplicate in a chunk reports before a
	// later bad line of the same chunk.
	_, err = enqueueJSONL(t, tb, "dup-then-bad", jsonlLines(n, func(i int) string {
		switch i {
		case n - 10:
			return `{"id":"r3"}`
		case n - 5:
			return `[1]`
		}
		return ""
	}))
	require.Contains(t, fmt.Sprint(err), fmt.Sprintf(`in.jsonl:%d: record id "r3" already used on line 3`, n-10))
	nothingWritten()

	got, err := enqueueJSONL(t, tb, "good", jsonlLines(n, nil))
	require.NoError(t, err)
	require.Equal(t, n, got)
	require.Equal(t, map[string]int{"available": n}, tb.jobStates(t))
	st := tb.status(t, "good")
	require.Equal(t, n, st.Total)
}

func TestEnqueueJSONLEmpty(t *testing.T) {
	t.Parallel()
	tb := setup(t, fakeprovider.Scenario{}, tweaks{})
	_, err := enqueueJSONL(t, tb, "empty", "\n\n")
	require.ErrorIs(t, err, enqueue.ErrNoRecords)
	require.Equal(t, map[string]int{}, tb.countBy(t, "SELECT id, count(*) FROM triage_batch GROUP BY 1"))
}
