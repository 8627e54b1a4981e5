package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const labelSchema = `{
  "type": "object",
  "properties": {
    "label": {"type": "string", "enum": ["amber", "basalt"]},
    "score": {"type": "number", "minimum": 0, "maximum": 1}
  },
  "required": ["label", "score"]
}`

// writeSchemaConfig writes triage.toml (minimal plus extra) and, when
// schema is not "", schemas/label.json beside it, and loads it.
func writeSchemaConfig(t *testing.T, extra, schema string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	if schema != "" {
		require.NoError(t, os.Mkdir(filepath.Join(dir, "schemas"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "schemas", "label.json"), []byte(schema), 0o644))
	}
	path := filepath.Join(dir, "triage.toml")
	require.NoError(t, os.WriteFile(path, []byte(minimal+extra), 0o644))
	return Load(path)
}

func TestSchemaOutput(t *testing.T) {
	t.Parallel()
	cfg, err := writeSchemaConfig(t, "output = \"json_schema\"\nschema_file = \"schemas/label.json\"\n", labelSchema)
	require.NoError(t, err, "schema_file is read relative to triage.toml's folder")
	p, err := cfg.Pipeline("enrich")
	require.NoError(t, err)
	require.Equal(t, OutputJSONSchema, p.Output)
	require.True(t, p.WantsJSON())
	require.True(t, p.Strict(), "strict unless schema_strict = false")
	require.Equal(t, "enrich", p.SchemaName())
	require.NotContains(t, string(p.Schema), "\n", "the schema is sent compacted")
	require.Contains(t, string(p.Schema), `"required":["label","score"]`)

	require.Empty(t, p.CheckSchema([]byte(`{"label":"amber","score":0.5}`)))
	require.Equal(t, `at '/score': got string, want number (rule /properties/score/type)`,
		p.CheckSchema([]byte(`{"label":"amber","score":"high"}`)))
	require.Equal(t, `at '': missing property 'score' (rule /required)`, p.CheckSchema([]byte(`{"label":"amber"}`)))
	require.Contains(t, p.CheckSchema([]byte(`{"label":"zinc","score":0.5}`)), "(rule /properties/label/enum)")

	cfg, err = writeSchemaConfig(t, "output = \"json_schema\"\nschema_file = \"schemas/label.json\"\nschema_strict = false\n", labelSchema)
	require.NoError(t, err)
	p, _ = cfg.Pipeline("enrich")
	require.False(t, p.Strict())

	plain, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	p, _ = plain.Pipeline("enrich")
	require.Empty(t, p.CheckSchema([]byte(`{"anything":1}`)), "no schema, nothing to check")
}

// TestSchemaOutputErrors: every mistake names the file, the pipeline and
// the setting (and the schema file's line), and nothing loads.
func TestSchemaOutputErrors(t *testing.T) {
	t.Parallel()
	at := `triage.toml: pipelines[0] "enrich": `
	use := "output = \"json_schema\"\nschema_file = \"schemas/label.json\"\n"
	for _, tc := range []struct{ name, extra, schema, want string }{
		{"no schema_file", "output = \"json_schema\"\n", "", at + `output = "json_schema" needs schema_file`},
		{"missing file", use, "", at + `schema_file "schemas/label.json": no such file or directory`},
		{"schema_file without json_schema", "schema_file = \"schemas/label.json\"\n", labelSchema,
			at + `schema_file is set but output is "json": set output = "json_schema"`},
		{"schema_strict without json_schema", "schema_strict = false\n", "", at + `schema_strict is set but output is "json"`},
		{"not JSON", use, "{\n  \"type\": \"object\",\n  \"properties\": {,}\n}", at + `schema_file "schemas/label.json" is not JSON: line 3: invalid character ','`},
		{"not an object", use, `[1, 2]`, at + `schema_file "schemas/label.json" must hold one JSON object (a JSON Schema), not an array`},
		{"not an object schema", use, `{"type": "string"}`, at + `schema_file "schemas/label.json": the schema's type must be "object"`},
		{"invalid schema", use, `{"type": "object", "properties": {"a": {"type": "strung"}}}`, at + `schema_file "schemas/label.json" is not a valid JSON Schema:`},
		{"outside $ref", use, `{"type": "object", "properties": {"a": {"$ref": "other.json"}}}`, at + `schema_file "schemas/label.json" is not a valid JSON Schema: failing loading "other.json": it is outside the schema file`},
	} {
		_, err := writeSchemaConfig(t, tc.extra, tc.schema)
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.want, tc.name)
	}

	deepseek := strings.Replace(minimal, `vendor = "openai"`, `vendor = "deepseek"`, 1)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "s.json"), []byte(labelSchema), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "triage.toml"), []byte(deepseek+"output = \"json_schema\"\nschema_file = \"s.json\"\n"), 0o644))
	_, err := Load(filepath.Join(dir, "triage.toml"))
	require.ErrorContains(t, err, at+`output = "json_schema" cannot be sent to model "gpt-4o-mini": its key "main" is vendor "deepseek", and DeepSeek's API has JSON mode only`)
}
