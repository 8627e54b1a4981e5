package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// overflowInput: record r2 is about 3,000 tokens, over the fake's 2,000.
func overflowInput() string {
	return `{"id":"r1","name":"short"}` + "\n" +
		`{"id":"r2","name":"long","note":"` + strings.Repeat("lorem ipsum ", 1000) + `"}` + "\n"
}

// TestOverflowTruncateCLI: with on_overflow = "truncate" the run completes,
// export marks the truncated record, and `triage ledger --record` shows its
// two calls.
func TestOverflowTruncateCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{NoReplay: true, Poison: fakeprovider.Poison{ContextTokens: 2000}},
		"max_tokens = 256\non_overflow = \"truncate\"\n")
	r := c.run(overflowInput(), "run", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, 3, c.fake.Stats().Requests)

	r = c.run("", "export", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2)
	// Every exported record names the model that answered it (fallback
	// models); only the truncated one is marked truncated.
	require.NotContains(t, lines[0], `"truncated"`)
	require.Contains(t, lines[1], `"triage":{"truncated":true,"model":"fake-model"}`)

	r = c.run("", "ledger", "--batch", "b1", "--record", "r2", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var calls []struct {
		Status string  `json:"status"`
		Reason *string `json:"reason"`
		Change string  `json:"change"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &calls), r.stdout)
	require.Len(t, calls, 2)
	require.Equal(t, "truncated", calls[0].Change)
	require.Equal(t, "ok", calls[0].Status)
	require.Equal(t, "context_length", *calls[1].Reason)
	require.Equal(t, "", calls[1].Change)

	r = c.run("", "ledger", "--batch", "b1", "--calls")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `r2\s+\d+\s+ok\s+-\s+ok\s+ok\s+truncated`, r.stdout)
	require.Equal(t, exitUsage, c.run("", "ledger", "--record", "r2").code, "--record needs --batch")
}

// TestOverflowDefaultCLI: by default the long record costs one call and is
// dead-lettered; dlq show lists its one call.
func TestOverflowDefaultCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{NoReplay: true, Poison: fakeprovider.Poison{ContextTokens: 2000}}, "max_tokens = 256\n")
	r := c.run(overflowInput(), "run", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitDeadLetters, r.code, r.stderr)
	require.Equal(t, 2, c.fake.Stats().Requests)

	r = c.run("", "dlq", "list", "--batch", "b1", "--reason", "context_length", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var dls []struct {
		ID int64 `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &dls))
	require.Len(t, dls, 1)
	r = c.run("", "dlq", "show", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "calls (oldest first):")
	require.Regexp(t, `1\s+failed\s+-\s+rejected\s+context_length\s+400\s+-\s+triage-`, r.stdout)
}
