package main

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// `triage ledger` reports the records possibly billed twice as a number,
// per key with the key's ambiguous policy: here the default retry resent a
// call that hung after the provider billed it, and the provider (no
// replay) billed it again.
func TestLedgerReportsPossibleDoubleBills(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{NoReplay: true, RecordScripts: map[string][]fakeprovider.Step{"r002": {{Action: fakeprovider.ActionHang}}}}
	c := newCLI(t, sc, "")
	toml, err := os.ReadFile(c.config)
	require.NoError(t, err)
	toml = regexp.MustCompile(`(?m)^timeout = ".*"$`).ReplaceAll(toml, []byte(`timeout = "300ms"`))
	require.NoError(t, os.WriteFile(c.config, toml, 0o600))
	r := c.run(poisoned(3), "run", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, 1, c.fake.Stats().DoubleBilledRecords)

	r = c.run("", "ledger", "--batch", "b1", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var rep struct {
		PossiblyDoubleBilled int `json:"possibly_double_billed"`
		Ambiguity            []struct {
			Key                  string `json:"key"`
			Policy               string `json:"policy"`
			Unanswered           int    `json:"unanswered"`
			FoundByLookup        int    `json:"found_by_lookup"`
			PossiblyDoubleBilled int    `json:"possibly_double_billed"`
			Resent               int    `json:"resent"`
			DeadLettered         int    `json:"dead_lettered"`
			Unknown              int    `json:"unknown"`
		} `json:"ambiguity"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Equal(t, 1, rep.PossiblyDoubleBilled)
	require.Len(t, rep.Ambiguity, 1)
	require.Equal(t, "main", rep.Ambiguity[0].Key)
	require.Equal(t, "retry", rep.Ambiguity[0].Policy)
	require.Equal(t, 1, rep.Ambiguity[0].Unanswered)
	require.Equal(t, 1, rep.Ambiguity[0].PossiblyDoubleBilled)
	require.Equal(t, 1, rep.Ambiguity[0].Resent, "the lost answer was resent")
	require.Zero(t, rep.Ambiguity[0].DeadLettered)
	require.Zero(t, rep.Ambiguity[0].Unknown)

	r = c.run("", "ledger", "--batch", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "key main (ambiguous = retry): 1 lost answers: 0 found by look-up (billed once), 1 resent, 0 dead-lettered, 0 still unknown; 1 records possibly billed twice")

	// Per attempt: the hung call says it was resent, in --calls and in
	// triage status.
	r = c.run("", "ledger", "--batch", "b1", "--record", "r002", "--calls", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var calls []struct {
		Status     string `json:"status"`
		Resolution string `json:"resolution"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &calls), r.stdout)
	require.Len(t, calls, 2)
	require.Equal(t, "ok", calls[0].Status, "newest first")
	require.Empty(t, calls[0].Resolution, "an answered call has no resolution")
	require.Equal(t, "possibly_billed", calls[1].Status)
	require.Equal(t, "resent", calls[1].Resolution)
	r = c.run("", "ledger", "--batch", "b1", "--record", "r002", "--calls")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `possibly_billed .*resent`, r.stdout)

	r = c.run("", "status", "b1", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var st struct {
		LostAnswers *struct {
			Found, Resent, Unknown int
			DeadLettered           int `json:"dead_lettered"`
		} `json:"lost_answers"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st), r.stdout)
	require.NotNil(t, st.LostAnswers, r.stdout)
	require.Equal(t, 1, st.LostAnswers.Resent)
	require.Zero(t, st.LostAnswers.Found+st.LostAnswers.DeadLettered+st.LostAnswers.Unknown)
	r = c.run("", "status", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `lost answers: +1: 0 found by look-up, 1 resent, 0 dead-lettered, 0 still unknown`, r.stdout)
}
