package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/workertest"
)

// `work --exit-when-idle` interrupted with jobs left exits 4, as `run`
// does, and says what is left (issue 24: it exited 0 with 17 of 30
// records pending, so `work && export && notify` reported success).
func TestWorkExitWhenIdleInterruptedWithWorkLeftExits4(t *testing.T) {
	t.Parallel()
	// Every call finds the key exhausted: the jobs stay queued.
	c := newCLI(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}}, "")
	r := c.run(jsonl(3), "enqueue", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitOK, r.code, r.stderr)

	code, logged := c.interruptWork(t, func(s fakeprovider.Stats) bool { return s.Requests > 0 }, "--exit-when-idle") // SIGTERM
	require.Equal(t, exitQueued, code, logged)
	require.Contains(t, logged, "stopped with 3 jobs left")
}

// export of a batch that has not settled fails with nothing written unless
// --partial (issue 24: it exited 0 with a note on stderr).
func TestExportOfAnUnfinishedBatchFails(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	r := c.run(jsonl(3), "enqueue", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = c.run("", "export", "b1")
	require.Equal(t, exitQueued, r.code, r.stderr)
	require.Empty(t, r.stdout, "no partial file")
	require.Contains(t, r.stderr, "batch b1 has not settled: 3 of 3 records pending")
	r = c.run("", "export", "--partial", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "exported 0 records; skipped 3")
}

// `triage wait B` returns run's codes: 0 settled, 3 settled with dead
// letters, 4 not settled (timeout, budget spent), 2 no such batch.
func TestWaitReturnsRunsCodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	r := c.run("", "wait", "nope")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `no batch "nope"`)
	r = c.run("", "wait")
	require.Equal(t, exitUsage, r.code)

	r = c.run(jsonl(3), "enqueue", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = c.run("", "wait", "b1", "--timeout", "300ms")
	require.Equal(t, exitQueued, r.code, r.stderr)
	require.Contains(t, r.stderr, "batch b1 not settled: --timeout 300ms passed; 3 of 3 records pending")

	done := make(chan result, 1)
	go func() { done <- c.run("", "wait", "b1") }()
	r = c.run("", "work", "--exit-when-idle")
	require.Equal(t, exitOK, r.code, r.stderr)
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("wait did not return once the batch settled")
	}
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "batch b1 settled: 3 completed, 0 dead-lettered of 3")

	dlqSeedBatch(t, c, "b2", 1)
	dlqSeedDeadLetters(t, c, dlqSeededDL{batch: "b2", record: "r001", class: "rejected", reason: "context_length", status: 400})
	r = c.run("", "wait", "b2")
	require.Equal(t, exitDeadLetters, r.code, r.stderr)

	dlqSeedBatch(t, c, "b3", 1)
	require.NoError(t, ledger.SetBatchState(ctx, c.db.Pool, "b3", ledger.BatchPausedBudget))
	r = c.run("", "wait", "b3")
	require.Equal(t, exitQueued, r.code, r.stderr)
	require.Contains(t, r.stderr, "its budget is spent")
}

// The exit-code table of docs/commands.md names every command.
func TestExitCodeTableCoversEveryCommand(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/commands.md")
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "Exit codes (*contract*")
	require.GreaterOrEqual(t, start, 0, "docs/commands.md has the exit-code table")
	end := strings.Index(doc[start:], "| command | what it does |")
	require.Positive(t, end)
	table := doc[start : start+end]
	for name := range commands {
		require.Regexp(t, "(?m)^\\|[^\\n]*`"+name+"( [a-z]+)?`", table, "command %s is in the exit-code table", name)
	}
	for _, code := range []string{"| 0 |", "| 3 |", "| 4 |"} {
		require.Contains(t, table, code)
	}
}

// A run whose key the provider refuses as invalid, and that never answered,
// stops with exit 2 within a few calls, naming the key and its environment
// variable (issue 24: it waited for probes until someone came).
func TestRunWithARevokedKeyExits2(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	c.envs[workertest.APIKeyEnv] = "sk-revoked"
	r := c.run("", "run", "--pipeline", "enrich", "--batch", "b1", "--max-wait", "30s", "--progress-interval", "50ms", c.file("in.jsonl", jsonl(20)))
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "the provider refuses key main as invalid (invalid_api_key): the API key in $"+workertest.APIKeyEnv+" is wrong or revoked")
	require.Contains(t, r.stderr, "a top-up will not help")
	require.LessOrEqual(t, c.fake.Stats().Requests, 5, "within a few calls")
	r = c.run("", "keys")
	require.Contains(t, r.stdout, "refused as invalid")
}

// --version prints the build's version and exits 0.
func TestVersion(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	for _, arg := range []string{"--version", "version"} {
		r := c.run("", arg)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Regexp(t, `^triage \S.* go1\.\d+`, r.stdout)
	}
}

// `work --exit-when-idle` with only a batch paused by hand left queued
// exits 4, naming the batch: its records are not done, so `work && export
// && notify` must not report success (issue 24).
func TestWorkExitWhenIdleWithAPausedBatchExits4(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{NoReplay: true}, "")
	r := c.run(jsonl(2), "enqueue", "--pipeline", "enrich", "--batch", "done", "-")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = c.run(jsonl(3), "enqueue", "--pipeline", "enrich", "--batch", "held", "-")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = c.run("", "batch", "pause", "held")
	require.Equal(t, exitOK, r.code, r.stderr)

	r = c.run("", "work", "--exit-when-idle")
	require.Equal(t, exitQueued, r.code, r.stderr)
	require.Contains(t, r.stderr, "batch held is paused by hand with 3 jobs queued")
	require.Contains(t, r.stderr, "`triage batch resume held`")
	require.Equal(t, 2, c.fake.Stats().Requests, "the paused batch made no call")
}

// The same with an Anthropic key: its 401 authentication_error is an
// invalid key too, not "key or billing" (issue 24: a bad Anthropic key was
// not called invalid, so run waited for probes as for a top-up).
func TestRunWithARevokedAnthropicKeyExits2(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	fake, baseURL := workertest.Provider(t, fakeprovider.Scenario{APIKey: cliAPIKey})
	c.fake = fake
	toml := workertest.Config(workertest.ConfigOptions{BaseURL: baseURL, Vendor: "anthropic"})
	require.NoError(t, os.WriteFile(c.config, []byte(toml), 0o600))
	c.envs[workertest.APIKeyEnv] = "sk-ant-revoked"
	r := c.run("", "run", "--pipeline", "enrich", "--batch", "b1", "--max-wait", "30s", "--progress-interval", "50ms", c.file("in.jsonl", jsonl(20)))
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "the provider refuses key main as invalid (invalid_api_key)")
	require.Contains(t, r.stderr, "a top-up will not help")
	require.LessOrEqual(t, c.fake.Stats().Requests, 5, "within a few calls")
}
