package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

func appendConfig(t *testing.T, c *cli, text string) {
	t.Helper()
	b, err := os.ReadFile(c.config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(c.config, append(b, text...), 0o600))
}

func TestClassifyExplain(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	teapot := c.file("teapot.json", `{"error":{"message":"Account balance is in ARREARS","type":"billing","code":"arrears"}}`)

	// Without a rule: the default, and why.
	r := c.run("", "classify", "--vendor", "other", "--status", "418", "--body-file", teapot, "--explain")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"reason":"unknown_4xx","known":false,"decided_by":"status"}`)
	require.Contains(t, r.stdout, "rule: default/unknown_4xx (default: no rule matched)")
	require.Contains(t, r.stdout, "why: no row of the tables wrapped, zhipu, minimax, model, signal/model, request, openai, signal, generic matched")

	// A built-in row names its fixture.
	quota := c.file("quota.json", `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	r = c.run("", "classify", "--vendor", "openai", "--status", "429", "--body-file", quota, "--explain")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "rule: openai/billing_quota (built-in)")
	require.Contains(t, r.stdout, "fixture: classify/testdata/openai/")

	// The configuration's [[rules]] come first.
	appendConfig(t, c, `
[[rules]]
status = 418
code = "arrears"
class = "exhausted"
reason = "arrears_balance"
`)
	r = c.run("", "classify", "--vendor", "other", "--status", "418", "--body-file", teapot, "--explain")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `{"class":"exhausted","retry_after_s":null,"code":"arrears","reason":"arrears_balance","known":true,"decided_by":"user_rule"}`)
	require.Contains(t, r.stdout, "rule: rules[0] (user rule from triage.toml")

	r = c.run(`{"vendor":"other","phase":"response","status":418,"body":"{\"error\":{\"code\":\"arrears\"}}"}`+"\n", "classify", "--jsonl", "--explain")
	require.Equal(t, exitOK, r.code, r.stderr)
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &line))
	require.Equal(t, "user/rules[0]", line["rule"])
	require.Equal(t, "user", line["rule_kind"])

	// A bad rule is bad input, naming the field.
	appendConfig(t, c, "\n[[rules]]\nstatus = 400\nclass = \"retryable\"\nreason = \"x\"\n")
	r = c.run("", "classify", "--vendor", "other", "--status", "418", "--body-file", teapot)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `rules[1].class: "retryable" is not a class`)
}

func TestDLQUnknownAndRule(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	dlqSeedBatch(t, c, "b1", 2)
	add := func(rec, rule string, unknown bool) int64 {
		id, err := ledger.AddDeadLetter(context.Background(), c.db.Pool, ledger.DeadLetterRow{
			Batch: "b1", RecordID: rec, Pipeline: "enrich", Key: "main", Class: classify.Rejected, Reason: "x",
			HTTPStatus: 418, Attempts: 1, Rule: rule, Unknown: unknown,
		})
		require.NoError(t, err)
		return id
	}
	known := add("r001", "openai/bad_request", false)
	unknown := add("r002", "default/unknown_4xx", true)

	items := dlqListJSON(t, c, "--unknown")
	require.Len(t, items, 1)
	require.Equal(t, float64(unknown), items[0]["id"])
	require.Len(t, dlqListJSON(t, c), 2)

	r := c.run("", "dlq", "show", strconv.FormatInt(unknown, 10))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "default/unknown_4xx (no rule knew this error")
	r = c.run("", "dlq", "show", strconv.FormatInt(known, 10), "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var shown map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &shown))
	require.Equal(t, "openai/bad_request", shown["rule"])
	require.Equal(t, true, shown["known"])
}
