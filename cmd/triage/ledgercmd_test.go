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

// A 200 whose body is not the vendor's format (a garbage 200) may have
// been billed: its estimate is possibly billed, on a row of its own
// (ok_unreadable), not mixed into the ok row, whose answers are all usable.
func TestLedgerGarbage200IsItsOwnRow(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{
		RecordScripts: map[string][]fakeprovider.Step{"r002": {{Action: fakeprovider.ActionGarbage}}},
	}, "")
	r := c.run(jsonl(3), "run", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitDeadLetters, r.code, r.stderr)

	r = c.run("", "ledger", "--batch", "b1", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var rep struct {
		Possibly float64 `json:"possibly_billed_usd"`
		ByClass  []struct {
			Class    string  `json:"class"`
			Calls    int     `json:"calls"`
			Possibly float64 `json:"possibly_billed_usd"`
		} `json:"by_class"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Positive(t, rep.Possibly, "the garbage 200 may have been billed")
	rows := map[string][2]float64{}
	for _, u := range rep.ByClass {
		rows[u.Class] = [2]float64{float64(u.Calls), u.Possibly}
	}
	require.Equal(t, [2]float64{2, 0}, rows["ok"], "the ok row holds the two usable answers, nothing possibly billed: %s", r.stdout)
	require.Equal(t, [2]float64{1, rep.Possibly}, rows["ok_unreadable"], r.stdout)

	r = c.run("", "ledger", "--batch", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^\s*ok_unreadable\s+1\s+1\s`, r.stdout)
	require.Contains(t, r.stdout, "ok_unreadable: a 2xx whose body was not usable")
}
