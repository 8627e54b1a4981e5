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

// pause, resume and delete: what each says, what each refuses.
func TestBatchPauseResumeDelete(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{NoReplay: true}, "")
	r := c.run("", "enqueue", "--pipeline", "enrich", "--batch", "b1", c.file("b1.jsonl", jsonl(4)))
	require.Equal(t, exitOK, r.code, r.stderr)

	r = c.run("", "batch", "pause", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "batch b1: paused; its jobs stay queued and make no call")
	r = c.run("", "batch", "pause", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "batch b1: paused already")
	r = c.run("", "status", "b1", "--json")
	require.Contains(t, r.stdout, `"state":"paused"`)

	r = c.run("", "batch", "delete", "b1")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `batch "b1" is not settled (0 of 4 records ended): nothing deleted; cancel it first`)

	r = c.run("", "batch", "resume", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "batch b1: resumed")
	r = c.run("", "batch", "resume", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "batch b1: not paused by hand (state running), nothing to resume")

	r = c.run("", "work", "--exit-when-idle")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, 4, c.fake.Stats().Requests)
	r = c.run("", "batch", "pause", "b1")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "is settled")

	r = c.run("", "batch", "delete", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "batch b1: deleted (4 records")
	r = c.run("", "status", "b1")
	require.Equal(t, exitUsage, r.code)
	r = c.run("", "batch", "delete", "b1")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `no batch "b1"`)

	// A cancelled batch cannot be resumed; one requeue brings it back.
	r = c.run("", "enqueue", "--pipeline", "enrich", "--batch", "b2", c.file("b2.jsonl", jsonl(2)))
	require.Equal(t, exitOK, r.code, r.stderr)
	r = c.run("", "batch", "cancel", "b2")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = c.run("", "batch", "resume", "b2")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "a cancelled batch cannot be resumed")
	r = c.run("", "dlq", "requeue", "--batch", "b2", "--reason", "cancelled")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = c.run("", "work", "--exit-when-idle")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = c.run("", "status", "b2", "--json")
	require.Contains(t, r.stdout, `"completed":2`)
}

// A run whose worker also works another batch queued on its key says so as
// it starts on it, and its summary shows what it spent there (issue 24: a
// 5-record run made about 310 calls for two abandoned batches and reported
// only its own $0.0001).
func TestRunSaysItWorksOtherBatches(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{NoReplay: true}, "")
	r := c.run("", "enqueue", "--pipeline", "enrich", "--batch", "old", c.file("old.jsonl", jsonl(5)))
	require.Equal(t, exitOK, r.code, r.stderr)
	r = c.run("", "run", "--pipeline", "enrich", "--batch", "mine", "--progress-interval", "50ms", c.file("mine.jsonl", jsonl(2)))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "also working batch old, queued earlier on the same key")
	require.Contains(t, r.stderr, "`triage batch cancel old`")
	require.Regexp(t, `this worker also made \d+ calls? for other batches queued on its keys, \$\d`, r.stdout)
	require.Regexp(t, `(?m)^  old: \d+ calls?, \$`, r.stdout)
}
