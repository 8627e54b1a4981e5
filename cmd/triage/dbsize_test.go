package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

func TestDBSize(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	r := c.run("", "enqueue", "--pipeline", "enrich", c.file("in.jsonl", jsonl(50)))
	require.Equal(t, exitOK, r.code, r.stderr)

	r = c.run("", "db", "size")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "triage_record")
	require.Contains(t, r.stdout, "river_job")
	require.Contains(t, r.stdout, "total")

	r = c.run("", "db", "size", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var out struct {
		Tables []struct {
			Table string `json:"table"`
			Bytes int64  `json:"bytes"`
		} `json:"tables"`
		Total int64 `json:"total_bytes"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	var sum int64
	names := map[string]bool{}
	for _, tb := range out.Tables {
		sum += tb.Bytes
		names[tb.Table] = true
	}
	require.Equal(t, out.Total, sum)
	require.True(t, names["triage_provider_batch_line"] && names["triage_attempt"], "%v", names)

	r = c.run("", "db", "size", "extra")
	require.Equal(t, exitUsage, r.code)
}

func TestHumanBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1 kB", 8192: "8.19 kB", 1_430_000_000: "1.43 GB"} {
		require.Equal(t, want, humanBytes(n), n)
	}
}
