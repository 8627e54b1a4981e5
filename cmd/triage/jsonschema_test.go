package main

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// labelSchema is what the fake's answers hold, less its digest: an answer
// built without the schema (a plain JSON answer carries "digest") breaks
// additionalProperties, so a schema that did not reach the provider shows.
const labelSchema = `{
  "type": "object",
  "properties": {
    "id": {"type": "string"},
    "label": {"type": "string"},
    "score": {"type": "number", "minimum": 0, "maximum": 1}
  },
  "required": ["id", "label", "score"],
  "additionalProperties": false
}`

// TestRunJSONSchema: output = "json_schema" end to end through `triage run`
// with the fake provider, for both wire formats, sync and as a provider
// batch: the schema reaches the provider in its structured-output form,
// answers that follow it are stored, and one that breaks it is
// dead-lettered as invalid_output naming the rule that failed.
func TestRunJSONSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, vendor, extra string }{
		{"openai", "openai", ""},
		{"anthropic", "anthropic", ""},
		{"anthropic stream", "anthropic", "stream = true\n"},
		{"openai batch", "openai", "mode = \"batch\"\n"},
		{"anthropic batch", "anthropic", "mode = \"batch\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The third request (a sync call or a batch line) answers off
			// the schema.
			c := newCLI(t, fakeprovider.Scenario{Script: []fakeprovider.Step{{Action: fakeprovider.ActionOK}, {Action: fakeprovider.ActionOK},
				{Action: fakeprovider.ActionOffSchema}}}, "")
			c.file("label.json", labelSchema)
			raw, err := os.ReadFile(c.config)
			require.NoError(t, err)
			toml := strings.Replace(string(raw), `vendor = "openai"`, `vendor = "`+tc.vendor+`"`, 1)
			toml = strings.Replace(toml, "\napi_key_env = ", "\nbatch_gather = \"1s\"\nbatch_poll_min = \"500ms\"\nbatch_poll_max = \"500ms\"\napi_key_env = ", 1)
			toml += "output = \"json_schema\"\nschema_file = \"label.json\"\nschema_strict = true\n" + tc.extra
			require.NoError(t, os.WriteFile(c.config, []byte(toml), 0o600))

			r := c.run(jsonl(4), "run", "--pipeline", "enrich", "--batch", "b1", "-")
			require.Equal(t, exitDeadLetters, r.code, r.stderr)
			require.Contains(t, r.stdout, "4 records, 3 completed, 1 dead-lettered, 0 pending")

			r = c.run("", "dlq", "show", "1")
			require.Equal(t, exitOK, r.code, r.stderr)
			require.Contains(t, r.stdout, `invalid_output`)
			require.Contains(t, r.stdout, `the answer does not follow schema_file "label.json": at '': missing properties 'id', 'label', 'score' (rule /required)`,
				"the dead letter names the schema and the rule")

			r = c.run("", "export", "b1")
			require.Equal(t, exitOK, r.code, r.stderr)
			sc := bufio.NewScanner(strings.NewReader(r.stdout))
			stored := 0
			for sc.Scan() {
				var row struct {
					ID         string          `json:"id"`
					Enrichment json.RawMessage `json:"enrichment"`
				}
				require.NoError(t, json.Unmarshal(sc.Bytes(), &row), sc.Text())
				if row.Enrichment == nil || string(row.Enrichment) == "null" {
					continue
				}
				lastUser := "Record: " + recordJSON(t, row.ID)
				require.JSONEq(t, fakeprovider.ExpectedSchemaAnswer(lastUser, json.RawMessage(labelSchema), false), string(row.Enrichment), row.ID)
				stored++
			}
			require.Equal(t, 3, stored, "every answer that follows the schema is stored: %s", r.stdout)
			st := c.fake.Stats()
			require.Equal(t, 4, st.BilledCalls, "one call a record: an answer off the schema is not resent")
			require.Equal(t, 1, st.ByAction[fakeprovider.ActionOffSchema])
		})
	}
}

// recordJSON is the compact JSON of record id as the prompt renders it.
func recordJSON(t *testing.T, id string) string {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(jsonl(4)), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		if m["id"] == id {
			b, err := json.Marshal(m)
			require.NoError(t, err)
			return string(b)
		}
	}
	t.Fatalf("no record %s", id)
	return ""
}
