package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

func TestLedger(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{
		Poison: fakeprovider.Poison{InvalidMarker: "POISON"},
		RecordScripts: map[string][]fakeprovider.Step{
			"r001": {{Status: 503}},
		},
	}, "")
	r := c.run(poisoned(4, 4), "run", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitDeadLetters, r.code, r.stderr)

	r = c.run("", "ledger", "--batch", "b1", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var rep struct {
		Batch   *string `json:"batch"`
		Key     *string `json:"key"`
		Calls   int     `json:"calls"`
		Records int     `json:"records"`
		Retries int     `json:"retries"`
		Input   int     `json:"input_tokens"`
		Spend   float64 `json:"spend_usd"`
		ByClass []struct {
			Class   string `json:"class"`
			Calls   int    `json:"calls"`
			Records int    `json:"records"`
			Retries int    `json:"retries"`
		} `json:"by_class"`
		ByModel []ledger.ModelUsage `json:"by_model"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Equal(t, "b1", *rep.Batch)
	require.Nil(t, rep.Key)
	require.Equal(t, 5, rep.Calls, "four first calls and one retry")
	require.Equal(t, 4, rep.Records)
	require.Equal(t, 1, rep.Retries)
	require.Positive(t, rep.Input)
	require.Positive(t, rep.Spend)
	byClass := map[string][3]int{}
	var order []string
	for _, u := range rep.ByClass {
		byClass[u.Class] = [3]int{u.Calls, u.Records, u.Retries}
		order = append(order, u.Class)
	}
	require.Equal(t, []string{"ok", "transient", "rejected"}, order, "the classifier's order")
	require.Equal(t, [3]int{3, 3, 1}, byClass["ok"])
	require.Equal(t, [3]int{1, 1, 0}, byClass["transient"])
	require.Equal(t, [3]int{1, 1, 0}, byClass["rejected"])
	require.Len(t, rep.ByModel, 1)
	require.Equal(t, ledger.ModelUsage{Model: "fake-model", Key: "main", Calls: 5, Answered: 3, SpendUSD: rep.ByModel[0].SpendUSD}, rep.ByModel[0])

	r = c.run("", "ledger", "--key", "main")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `transient\s+1\s+1\s+0\s+0\s+0\s`, r.stdout)
	require.Regexp(t, `total\s+5\s+4\s+1\s`, r.stdout)

	r = c.run("", "ledger", "--key", "other", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"calls":0`)

	require.Equal(t, exitUsage, c.run("", "ledger", "--batch", "nope").code)
	require.Equal(t, exitUsage, c.run("", "ledger", "b1").code)
	require.Equal(t, exitUsage, c.run("", "ledger", "--nope").code)
}
