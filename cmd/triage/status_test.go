package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/enqueue"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/operator"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, "")
	r := c.run(poisoned(3, 3), "run", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitDeadLetters, r.code, r.stderr)
	r = c.run(jsonl(2), "enqueue", "--pipeline", "enrich", "--batch", "b2", "-")
	require.Equal(t, exitOK, r.code, r.stderr)

	r = c.run("", "status", "--json", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	var obj map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &obj))
	var names []string
	for k := range obj {
		names = append(names, k)
	}
	slices.Sort(names)
	require.Equal(t, statusJSONKeys, names, "the contract's exact shape")
	var st ledger.Status
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, ledger.Status{Batch: "b1", Pipeline: "enrich", Total: 3, Completed: 2, DeadLettered: 1,
		Calls: 3, SpendUSD: st.SpendUSD, State: ledger.BatchSettled, Models: map[string]int{"fake-model": 2}}, st)
	require.Positive(t, st.SpendUSD)
	require.Equal(t, 1, strings.Count(r.stdout, "\n"), "one object, one line")

	r = c.run("", "status", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var list []ledger.Status
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list, 2)
	require.Equal(t, "b1", list[0].Batch)
	require.Equal(t, ledger.BatchRunning, list[1].State, "queued, nobody working it")
	require.Equal(t, 2, list[1].Pending)
	// Each batch says what is happening to it now, as status B does.
	var nows []operator.BatchNow
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &nows))
	require.NotNil(t, nows[0].Activity, r.stdout)
	require.Equal(t, operator.WaitingNothing, nows[0].Activity.WaitingOn, "settled: waiting on nothing")
	require.NotNil(t, nows[1].Activity, r.stdout)
	require.Equal(t, operator.WaitingNoWorker, nows[1].Activity.WaitingOn)
	require.Equal(t, 2, nows[1].Activity.QueuedJobs)
	require.Zero(t, nows[1].Activity.Workers)
	require.Contains(t, r.stdout, `"activity":{"workers":0,"running_jobs":0,"queued_jobs":2,`)

	r = c.run("", "status")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^BATCH\s+PIPELINE\s+TOTAL\s+COMPLETED\s+DEAD\s+PENDING\s+CALLS\s+SPEND_USD\s+STATE\s+ACTIVITY$`, r.stdout)
	require.Regexp(t, `(?m)^b1\s+enrich\s+3\s+2\s+1\s+0\s+3\s+\S+\s+settled\s+-$`, r.stdout)
	require.Regexp(t, `(?m)^b2\s+enrich\s+2\s+0\s+0\s+2\s+0\s+\S+\s+running\s+waiting: no worker on key main$`, r.stdout)

	r = c.run("", "status", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "dead-lettered:    1")

	r = c.run("", "status", "nope")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `no batch "nope"`)
	require.Equal(t, exitUsage, c.run("", "status", "b1", "b2").code)
	require.Equal(t, exitUsage, c.run("", "status", "--yaml").code)
}

func TestStatusWithoutConfigFile(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	r := runBare(t, c.envs, "status")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "no batches yet")
	r = runBare(t, c.envs, "ledger", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.JSONEq(t, `{"batch":null,"key":null,"calls":0,"records":0,"retries":0,"input_tokens":0,"output_tokens":0,
		"spend_usd":0,"possibly_billed_usd":0,"by_class":[],"partials":[],"by_model":[],"possibly_double_billed":0,"ambiguity":[]}`, r.stdout)
}

// statusJSONKeys is the contract's exact `triage status B --json` shape:
// DESIGN's ten fields, and cancelled (added by issue 9, counted in
// dead_lettered), models and fallback (added by issue 13: the completed
// records by the model that answered, and how many moved to a fallback),
// and activity (issue 24: what is working it now, and why it waits).
var statusJSONKeys = []string{"activity", "batch", "calls", "cancelled", "completed", "dead_lettered", "fallback", "models", "pending", "pipeline",
	"possibly_billed_usd", "spend_usd", "state", "total"}

func TestStatusBudgetAndWhyPaused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	recs, err := enqueue.ReadJSONL(strings.NewReader(jsonl(3)), "in.jsonl")
	require.NoError(t, err)
	budget := 5.0
	require.NoError(t, ledger.CreateBatch(ctx, c.db.Pool, ledger.Batch{ID: "b1", Pipeline: "enrich", Key: "main", BudgetUSD: &budget}, recs))
	id, err := ledger.BeginAttempt(ctx, c.db.Pool, ledger.Intent{Batch: "b1", RecordID: "r001", Attempt: 1, Key: "main",
		Model: "fake-model", IdempotencyKey: "k1", RequestHash: "h1"})
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(ctx, c.db.Pool, id, ledger.Outcome{Status: ledger.AttemptOK, CostUSD: 1.25}))

	jsonKeys := func(batch string) []string {
		t.Helper()
		r := c.run("", "status", batch, "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &obj))
		return dlqKeySet(obj)
	}

	// Running, with a budget: used and left; no worker process works it,
	// and it says so.
	r := c.run("", "status", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^state:\s+running$`, r.stdout)
	require.Regexp(t, `(?m)^budget:\s+\$5\.0000: \$1\.2500 used, \$3\.7500 left$`, r.stdout)
	require.Regexp(t, "(?m)^why:\\s+no worker process is working key main \\(no live heartbeat\\): start one with `triage work`", r.stdout)
	require.Regexp(t, `(?m)^workers:\s+none on key main \(no live heartbeat\)$`, r.stdout)
	require.Regexp(t, `(?m)^jobs:\s+0 running, 0 queued$`, r.stdout, "CreateBatch queued no job")
	require.Equal(t, statusJSONKeys, jsonKeys("b1"))
	r = c.run("", "status", "b1", "--json")
	var now operator.BatchNow
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &now))
	require.NotNil(t, now.Activity)
	require.Equal(t, operator.WaitingNoWorker, now.Activity.WaitingOn)
	require.Zero(t, now.Activity.Workers)

	// Paused by its budget: why, and how to raise it.
	require.NoError(t, ledger.SetBatchState(ctx, c.db.Pool, "b1", ledger.BatchPausedBudget))
	r = c.run("", "status", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^state:\s+paused_budget$`, r.stdout)
	require.Regexp(t, "(?m)^why:\\s+budget reached: spent \\$1\\.2500 of \\$5\\.0000; raise it with `triage batch budget b1 USD`$", r.stdout)
	require.Equal(t, statusJSONKeys, jsonKeys("b1"))

	// A batch without a budget whose key is exhausted: no budget line; why
	// is the key, since when and the next probe.
	dlqSeedBatch(t, c, "b2", 2)
	store := keys.DefaultStore(c.db.Pool)
	adm, err := store.Admit(ctx, "main", 0)
	require.NoError(t, err)
	opened, err := store.Trip(ctx, "main", adm, "insufficient_quota", time.Hour)
	require.NoError(t, err)
	require.True(t, opened)
	r = c.run("", "status", "b2")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^state:\s+paused_exhausted$`, r.stdout)
	require.Regexp(t, `(?m)^why:\s+key main exhausted since \d\d:\d\d, next probe in \S+$`, r.stdout)
	require.NotContains(t, r.stdout, "budget:")
	require.Equal(t, statusJSONKeys, jsonKeys("b2"))

	// The table reads each batch's key from its status, with no look-up.
	r = c.run("", "status")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^b1\s.*\spaused_exhausted\s+waiting: key main exhausted$`, r.stdout, "the breaker is the truth while it is open")
	require.Regexp(t, `(?m)^b2\s.*\spaused_exhausted\s+waiting: key main exhausted$`, r.stdout)
}

func TestPausedWhy(t *testing.T) {
	t.Parallel()
	budget := 2.0
	b := ledger.Batch{ID: "b1", Key: "main", BudgetUSD: &budget, SpentUSD: 2.5}
	require.Empty(t, operator.PausedWhy(ledger.Status{Batch: "b1", State: ledger.BatchRunning}, b, nil))
	require.Equal(t, "budget reached: spent $2.5000 of $2.0000; raise it with `triage batch budget b1 USD`",
		operator.PausedWhy(ledger.Status{Batch: "b1", State: ledger.BatchPausedBudget}, b, nil))
	require.Equal(t, "key main exhausted", operator.PausedWhy(ledger.Status{Batch: "b1", State: ledger.BatchPausedExhausted}, b, nil))
	require.Equal(t, "key main exhausted; 2 records moved to a fallback model",
		operator.PausedWhy(ledger.Status{Batch: "b1", State: ledger.BatchPausedExhausted, Fallback: 2}, b, nil))
	now := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	storm := &keys.KeyStatus{Key: "main", State: keys.StateClosed, Now: now, Storm: keys.StormStatus{State: keys.StateHalfOpen}}
	require.Equal(t, "waiting: key main in a storm of provider failures, probing",
		operator.PausedWhy(ledger.Status{Batch: "b1", State: ledger.BatchRunning}, b, storm), "`status` says why a running batch does not move")
	require.Equal(t, "$2.0000: $2.5000 used, $0.0000 left", budgetLine(2, 2.5), "never a negative amount left")
}
