package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// A batch queued by mistake and cancelled is not paid for by the next run
// (issue 24: `triage batch cancel oops` exited 0 and a 5-record run then
// made 305 provider requests).
func TestBatchCancelStopsAQueuedBatch(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{NoReplay: true}, "")
	r := c.run("", "enqueue", "--pipeline", "enrich", "--batch", "oops", c.file("oops.jsonl", jsonl(20)))
	require.Equal(t, exitOK, r.code, r.stderr)

	r = c.run("", "batch", "cancel", "oops")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "batch oops: cancelled; 20 records dead-lettered (reason cancelled)")

	r = c.run("", "run", "--pipeline", "enrich", "--batch", "mine", "--progress-interval", "50ms", c.file("mine.jsonl", jsonl(3)))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, 3, c.fake.Stats().Requests, "only the run's own records reach the provider")

	r = c.run("", "status", "oops", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"state":"settled"`)
	require.Contains(t, r.stdout, `"dead_lettered":20`)
	require.Contains(t, r.stdout, `"cancelled":20`)
}
