package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
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
	require.Equal(t, []string{"batch", "calls", "completed", "dead_lettered", "pending", "pipeline",
		"possibly_billed_usd", "spend_usd", "state", "total"}, names, "the contract's exact shape")
	var st ledger.Status
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, ledger.Status{Batch: "b1", Pipeline: "enrich", Total: 3, Completed: 2, DeadLettered: 1,
		Calls: 3, SpendUSD: st.SpendUSD, State: ledger.BatchSettled}, st)
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

	r = c.run("", "status")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^b1\s+enrich\s+3\s+2\s+1\s+0\s+3\s+\S+\s+settled$`, r.stdout)
	require.Regexp(t, `(?m)^b2\s+enrich\s+2\s+0\s+0\s+2\s+0\s+\S+\s+running$`, r.stdout)

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
		"spend_usd":0,"possibly_billed_usd":0,"by_class":[]}`, r.stdout)
}

func TestBatchState(t *testing.T) {
	t.Parallel()
	open := &keys.KeyStatus{Key: "main", State: keys.StateOpen}
	closed := &keys.KeyStatus{Key: "main", State: keys.StateClosed}
	for _, tc := range []struct {
		stored ledger.BatchState
		key    *keys.KeyStatus
		want   ledger.BatchState
	}{
		{ledger.BatchSettled, open, ledger.BatchSettled},
		{ledger.BatchRunning, open, ledger.BatchPausedExhausted},
		{ledger.BatchPausedExhausted, closed, ledger.BatchRunning},
		{ledger.BatchPausedBudget, closed, ledger.BatchPausedBudget},
		{ledger.BatchRunning, nil, ledger.BatchRunning},
	} {
		require.Equal(t, tc.want, batchState(ledger.Status{State: tc.stored}, tc.key), "%s/%v", tc.stored, tc.key)
	}
}
