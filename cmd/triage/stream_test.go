package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// TestCutStreamsThroughTheCLI: a streaming text pipeline whose streams are
// cut. The one that delivered enough is exported marked partial; the other
// is a dead letter whose partial output `dlq show` prints; `triage ledger`
// lists both.
func TestCutStreamsThroughTheCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{NoReplay: true, RecordScripts: map[string][]fakeprovider.Step{
		"r002": {{Action: fakeprovider.ActionCutStream, Chunks: 3}},
		"r003": {{Action: fakeprovider.ActionCutStream, Chunks: 1}},
	}}, "output = \"text\"\nstream = true\naccept_partial_min_chars = 30\nambiguous_retries = 0\n")
	r := c.run(jsonl(3), "run", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitDeadLetters, r.code, r.stderr)
	require.Equal(t, 3, c.fake.Stats().Requests)

	r = c.run("", "export", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 2)
	var marks []any
	for _, l := range lines {
		var rec struct {
			ID         string         `json:"id"`
			Enrichment string         `json:"enrichment"`
			Triage     map[string]any `json:"triage"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
		require.NotEmpty(t, rec.Enrichment)
		marks = append(marks, rec.Triage["partial"])
		if rec.ID == "r002" {
			require.Len(t, rec.Enrichment, 36, "three chunks of the answer")
		}
	}
	require.Equal(t, []any{nil, true}, marks, "only the cut record is marked partial")

	var dl []map[string]any
	r = c.run("", "dlq", "list", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &dl))
	require.Len(t, dl, 1)
	id := strconv.Itoa(int(dl[0]["id"].(float64)))
	r = c.run("", "dlq", "show", id)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "partial output (cut stream: 12 chars, 3 output tokens received)")
	r = c.run("", "dlq", "show", id, "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var shown struct {
		Partial struct {
			Text         string `json:"text"`
			Chars        int    `json:"chars"`
			OutputTokens int    `json:"output_tokens"`
		} `json:"partial"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &shown))
	require.Equal(t, 12, shown.Partial.Chars)
	require.Len(t, shown.Partial.Text, 12)

	r = c.run("", "ledger", "--batch", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "cut streams (partial output kept")
	require.Contains(t, r.stdout, "possibly_billed (accepted)")
	r = c.run("", "ledger", "--batch", "b1", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var rep struct {
		Partials []struct {
			RecordID string `json:"record_id"`
			Accepted bool   `json:"accepted"`
		} `json:"partials"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Len(t, rep.Partials, 2)
	accepted := map[string]bool{}
	for _, p := range rep.Partials {
		accepted[p.RecordID] = p.Accepted
	}
	require.Equal(t, map[string]bool{"r002": true, "r003": false}, accepted)
}
