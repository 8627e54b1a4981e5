package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

// The same file run twice with cache = true: the second run makes no call
// and costs $0; --no-cache calls again.
func TestRunTwiceWithCache(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{NoReplay: true}, "cache = true\n")
	in := c.file("in.jsonl", jsonl(5))

	r := c.run("", "run", in, "--pipeline", "enrich", "--batch", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, 5, c.fake.Stats().Requests)

	r = c.run("", "run", in, "--pipeline", "enrich", "--batch", "b2")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "5 records, 5 completed, 0 dead-lettered, 0 pending")
	require.Equal(t, 5, c.fake.Stats().Requests, "the second run made no call")
	r = c.run("", "status", "b2", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var st ledger.Status
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, 5, st.Completed)
	require.Zero(t, st.SpendUSD)

	r = c.run("", "export", "b2")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"enrichment"`)

	r = c.run("", "run", in, "--pipeline", "enrich", "--batch", "b3", "--no-cache")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, 10, c.fake.Stats().Requests, "--no-cache called for every record")

	// dlq requeue takes --no-cache too.
	r = c.run("", "dlq", "requeue", "--batch", "nope", "--no-cache")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.NotContains(t, r.stderr, "flag provided but not defined")
}
