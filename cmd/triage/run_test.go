package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

// poisoned makes n records, those in bad carrying the marker POISON.
func poisoned(n int, bad ...int) string {
	lines := strings.Split(strings.TrimSuffix(jsonl(n), "\n"), "\n")
	for _, i := range bad {
		lines[i-1] = strings.TrimSuffix(lines[i-1], "}") + `,"note":"POISON"}`
	}
	return strings.Join(lines, "\n") + "\n"
}

func TestRunSettles(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	in := c.file("in.jsonl", jsonl(5))

	r := c.run("", "run", in, "--pipeline", "enrich", "--batch", "b1", "--budget", "0.5", "--progress-interval", "50ms")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "enqueued 5 records as batch b1")
	require.Contains(t, r.stderr, "progress: 5/5 done, 0 dead-lettered, 0 pending")
	require.Contains(t, r.stderr, "settled")
	require.Contains(t, r.stdout, "batch b1 (pipeline enrich): 5 records, 5 completed, 0 dead-lettered, 0 pending")
	require.Regexp(t, `\s+ok\s+5\s+5\s+0\s`, r.stdout, "calls and records of class ok")
	require.Contains(t, r.stdout, "wall time")
	require.NotContains(t, r.stdout, "dead letters:")

	b, err := ledger.GetBatch(context.Background(), c.db.Pool, "b1")
	require.NoError(t, err)
	require.NotNil(t, b.BudgetUSD)
	require.InDelta(t, 0.5, *b.BudgetUSD, 1e-9, "--budget sets the batch's cap")

	// The batch id is taken now.
	r = c.run("", "run", "--pipeline", "enrich", "--batch", "b1", in)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "already exists")
}

func TestRunWithDeadLettersExits3(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, "")
	r := c.run(poisoned(4, 2), "run", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitDeadLetters, r.code, r.stderr)
	require.Contains(t, r.stdout, "4 records, 3 completed, 1 dead-lettered, 0 pending")
	require.Regexp(t, `\s+rejected\s+1\s+1\s`, r.stdout)
	require.Contains(t, r.stdout, "dead letters:")
	require.Regexp(t, `rejected\s+\S+\s+1`, r.stdout, "dead letters by class and reason")
	require.Equal(t, 1, c.fake.Stats().ByRecord["r002"].Requests, "a rejected record costs one call")
}

func TestRunExhaustedStopsAtMaxWaitExits4(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}}, "")
	r := c.run(jsonl(3), "run", "--pipeline", "enrich", "--batch", "b1", "--max-wait", "2s", "-")
	require.Equal(t, exitQueued, r.code, r.stderr)
	require.Contains(t, r.stderr, "key main exhausted")
	require.Contains(t, r.stderr, "stopped: --max-wait 2s passed; 3 records still queued")
	require.Contains(t, r.stdout, "3 records, 0 completed, 0 dead-lettered, 3 pending")
	require.Regexp(t, `\s+exhausted\s+\d+\s+\d+\s`, r.stdout)

	require.Equal(t, 3, c.jobs("available", "scheduled", "retryable"), "the jobs stay queued")

	// status reports the open breaker.
	r = c.run("", "status", "b1", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, "paused_exhausted", st["state"])
	r = c.run("", "status", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "key main exhausted since")

	// A top-up and a worker finish the batch.
	c.fake.TopUp(1)
	r = c.run("", "work", "--exit-when-idle")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = c.run("", "status", "b1", "--json")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, "settled", st["state"])
}

func TestRunBadUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	in := c.file("in.jsonl", jsonl(2))
	bad := c.file("bad.jsonl", `{"id":"a"}`+"\n"+`{"id":"a"}`+"\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--pipeline", "enrich", "--max-wait", "soon", in}, "invalid value"},
		{[]string{"run", "--pipeline", "enrich", "--budget", "-1", in}, "positive amount"},
		{[]string{"run", "--pipeline", "enrich", "--max-wait", "-1s", in}, "negative"},
		{[]string{"run", "--pipeline", "nope", in}, "nope"},
		{[]string{"run", in}, "--pipeline is required"},
		{[]string{"run", "--pipeline", "enrich", bad}, bad + ":2:"},
		{[]string{"--config", c.config + ".missing", "run", "--pipeline", "enrich", in}, "does not exist"},
	} {
		r := c.run("", tc.args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
	require.Equal(t, 0, c.count("triage_batch"))
	require.Equal(t, 0, c.count("river_job"))
}

// runAsync runs `triage --config <config> args...` in-process on ctx and
// returns its exit code on the channel.
func (c *cli) runAsync(ctx context.Context, stdin string, args ...string) (<-chan int, *signalWriter, *signalWriter) {
	stdout, stderr := &signalWriter{}, &signalWriter{}
	e := &env{stdin: strings.NewReader(stdin), stdout: stdout, stderr: stderr, getenv: func(k string) string { return c.envs[k] }}
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"--config", c.config}, args...), e) }()
	return done, stdout, stderr
}

func waitCode(t *testing.T, done <-chan int, stderr *signalWriter) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(60 * time.Second):
		t.Fatalf("the command did not end: %s", stderr.String())
		return 0
	}
}

func TestRunInterruptedExits4(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{Balance: &fakeprovider.Balance{USD: 0}}, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, stdout, stderr := c.runAsync(ctx, jsonl(3), "run", "--pipeline", "enrich", "--batch", "b1", "-")
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	require.NoError(t, c.fake.WaitFor(wctx, func(s fakeprovider.Stats) bool { return s.Requests > 0 }))
	cancel() // SIGINT
	require.Equal(t, exitQueued, waitCode(t, done, stderr), stderr.String())
	require.Contains(t, stderr.String(), "stopped: interrupted")
	require.Contains(t, stdout.String(), "3 pending")
}

func TestRunStopsWhenBudgetReachedExits4(t *testing.T) {
	t.Parallel()
	// The first call is throttled for a long while: nothing moves until the
	// batch's budget state changes.
	c := newCLI(t, fakeprovider.Scenario{Script: []fakeprovider.Step{
		{Action: fakeprovider.ActionRateLimit, RetryAfter: fakeprovider.Duration(time.Minute)}}}, "")
	done, _, stderr := c.runAsync(context.Background(), jsonl(2), "run", "--pipeline", "enrich", "--batch", "b1", "--budget", "0.01", "-")
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	require.NoError(t, c.fake.WaitFor(wctx, func(s fakeprovider.Stats) bool { return s.Requests > 0 }))
	// What the worker does when the batch's spend reaches its budget.
	require.NoError(t, ledger.SetBatchState(context.Background(), c.db.Pool, "b1", ledger.BatchPausedBudget))
	require.Equal(t, exitQueued, waitCode(t, done, stderr), stderr.String())
	require.Contains(t, stderr.String(), "stopped: the batch's budget is spent")
}

// The real thing, end to end: a budget that covers part of the batch stops
// the run with exit 4 and the rest queued; raising it with `triage batch
// budget` lets a worker finish the batch.
func TestRunBudgetEnforcedThenRaised(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "max_tokens = 50\n")
	// An estimate of one call is about 50 tokens out at $0.60/M: $0.00003. A
	// cap of $0.0002 lets a handful of calls through, not 40.
	r := c.run(jsonl(40), "run", "--pipeline", "enrich", "--batch", "b1", "--budget", "0.0002", "--progress-interval", "100ms", "-")
	require.Equal(t, exitQueued, r.code, r.stderr)
	st, err := ledger.BatchStatus(context.Background(), c.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, ledger.BatchPausedBudget, st.State)
	require.Less(t, st.Completed, 40)
	require.Positive(t, st.Pending)
	require.LessOrEqual(t, c.fake.Stats().BilledUSD, 0.0002+4*0.0001, "the bill passes the cap by at most the calls in flight")

	// A one-shot worker does not wait on a batch that waits for a human.
	r = c.run("", "work", "--exit-when-idle")
	require.Equal(t, exitOK, r.code, r.stderr)
	st, err = ledger.BatchStatus(context.Background(), c.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, ledger.BatchPausedBudget, st.State)
	require.Positive(t, st.Pending)

	r = c.run("", "batch", "budget", "b1", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = c.run("", "work", "--exit-when-idle")
	require.Equal(t, exitOK, r.code, r.stderr)
	st, err = ledger.BatchStatus(context.Background(), c.db.Pool, "b1")
	require.NoError(t, err)
	require.Equal(t, 40, st.Completed)
	require.Equal(t, ledger.BatchSettled, st.State)
}

// While the key's rate, not its workers, sets the speed, the progress line
// says so.
func TestRunSaysPacing(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{RateLimit: &fakeprovider.RateLimit{RequestsPerMinute: 600, BurstRequests: 2}}, "")
	r := c.run(jsonl(25), "run", "--pipeline", "enrich", "--batch", "b1", "--progress-interval", "100ms", "-")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "pacing at 9.7/s", "10 requests/s from the headers, less the headroom")
	require.Contains(t, r.stdout, "25 completed")
}
