package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

func TestExport(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, "")
	r := c.run(poisoned(4, 2), "run", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitDeadLetters, r.code, r.stderr)

	r = c.run("", "export", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 3, "the dead-lettered record is skipped")
	var ids []string
	for _, l := range lines {
		var rec struct {
			ID         string         `json:"id"`
			Name       string         `json:"name"`
			Enrichment map[string]any `json:"enrichment"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
		require.NotEmpty(t, rec.Name, "the record's own fields are kept")
		require.Equal(t, rec.ID, rec.Enrichment["id"], "each record gets its own answer, parsed: %s", l)
		ids = append(ids, rec.ID)
	}
	require.Equal(t, []string{"r001", "r003", "r004"}, ids, "input order")
	require.Contains(t, r.stderr, "exported 3 records; skipped 1 without a result")

	r = c.run("", "export", "nope")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `no batch "nope"`)
	require.Equal(t, exitUsage, c.run("", "export").code)
	require.Equal(t, exitUsage, c.run("", "export", "b1", "b2").code)
}

func TestEnrich(t *testing.T) {
	t.Parallel()
	b, err := enrich(json.RawMessage(`{"id": "a", "x": [1, 2]}`), json.RawMessage(`{"k": "v"}`), false)
	require.NoError(t, err)
	require.Equal(t, `{"id":"a","x":[1,2],"enrichment":{"k":"v"}}`, string(b))
	b, err = enrich(json.RawMessage(`{"enrichment": 1, "id": "a"}`), json.RawMessage(`"some text"`), false)
	require.NoError(t, err)
	require.Equal(t, `{"enrichment":"some text","id":"a"}`, string(b), "text output; an existing field is replaced")
	b, err = enrich(json.RawMessage(`{"id": "a"}`), json.RawMessage(`{"k": "v"}`), true)
	require.NoError(t, err)
	require.Equal(t, `{"id":"a","enrichment":{"k":"v"},"triage":{"truncated":true}}`, string(b), "an answer to a truncated request is marked")
	b, err = markModel([]byte(`{"id":"a","enrichment":{"k":"v"}}`), "fb-model")
	require.NoError(t, err)
	require.Equal(t, `{"id":"a","enrichment":{"k":"v"},"triage":{"model":"fb-model"}}`, string(b), "the model that answered")
}
