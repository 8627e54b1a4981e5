package main

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

// dlqExportKeys is the contract's key set of one `triage dlq export` line.
var dlqExportKeys = dlqSorted(append([]string{"error_excerpt", "known", "record"}, dlqListKeys...))

// dlqExportLines runs `dlq export args...` and decodes its JSONL.
func dlqExportLines(t *testing.T, c *cli, args ...string) []map[string]any {
	t.Helper()
	r := c.run("", append([]string{"dlq", "export"}, args...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		require.Equal(t, dlqExportKeys, dlqKeySet(m))
		out = append(out, m)
	}
	return out
}

// TestDLQExportReimport: `triage dlq export` writes what `dlq list` shows,
// one JSON object a line, each with its input record; the records a user
// takes from it (`jq -c .record`) and enqueues again are exactly the dead
// letters' records, ids and contents, and nothing else.
func TestDLQExportReimport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	r := c.run("", "dlq", "export")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Empty(t, r.stdout, "no dead letters: no lines")
	require.Contains(t, r.stderr, "exported 0 dead letters")

	ids := dlqSeedMorning(t, c)
	// A requeued dead letter is no longer dead: not exported.
	_, err := ledger.MarkRequeued(ctx, c.db.Pool, []int64{ids[1]})
	require.NoError(t, err)

	all := dlqExportLines(t, c)
	require.Len(t, all, 3)
	for i, want := range []int64{ids[0], ids[2], ids[3]} {
		require.EqualValues(t, want, all[i]["id"], "oldest first, as dlq list")
	}
	require.Equal(t, "b1", all[0]["batch"])
	require.Equal(t, "r001", all[0]["record_id"])
	require.Equal(t, "rejected", all[0]["class"])
	require.Equal(t, "context_length", all[0]["reason"])
	require.EqualValues(t, 400, all[0]["status"])
	require.Equal(t, "context_length_exceeded", all[0]["code"])
	require.EqualValues(t, 1, all[0]["attempts"])
	require.Equal(t, true, all[0]["known"])
	require.Nil(t, all[2]["status"])
	require.Nil(t, all[2]["code"])
	require.Contains(t, all[0]["error_excerpt"], "bad")
	r = c.run("", "dlq", "export")
	require.NotContains(t, r.stdout, cliAPIKey, "the excerpt is the redacted one")
	require.Contains(t, r.stderr, "exported 3 dead letters")

	// The same filters as dlq list.
	require.Len(t, dlqExportLines(t, c, "--batch", "b1"), 2)
	require.Len(t, dlqExportLines(t, c, "--class", "transient"), 1)
	require.Len(t, dlqExportLines(t, c, "--reason", "ambiguous_retries_exhausted"), 1)
	require.Empty(t, dlqExportLines(t, c, "--unknown"))
	for _, args := range [][]string{{"--batch", "nope"}, {"--class", "broken"}, {"b1"}, {"--frobnicate"}} {
		r := c.run("", append([]string{"dlq", "export"}, args...)...)
		require.Equal(t, exitUsage, r.code, args)
		require.Empty(t, r.stdout, "bad input writes nothing: %v", args)
	}

	// Re-import batch b1's dead letters, as docs/commands.md shows:
	// `triage dlq export --batch b1 | jq -c .record | triage enqueue ...`.
	var input strings.Builder
	for _, line := range dlqExportLines(t, c, "--batch", "b1") {
		b, err := json.Marshal(line["record"])
		require.NoError(t, err)
		input.Write(b)
		input.WriteByte('\n')
	}
	r = c.run(input.String(), "enqueue", "--pipeline", "enrich", "--batch", "again", "-")
	require.Equal(t, exitOK, r.code, r.stderr)
	again, err := ledger.Records(ctx, c.db.Pool, "again", nil)
	require.NoError(t, err)
	orig, err := ledger.Records(ctx, c.db.Pool, "b1", []string{"r001", "r003"})
	require.NoError(t, err)
	require.Len(t, again, len(orig))
	for i := range orig {
		require.Equal(t, orig[i].ID, again[i].ID)
		require.JSONEq(t, string(orig[i].Data), string(again[i].Data))
	}
}
