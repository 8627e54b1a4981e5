package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// OutputJSONSchema: one JSON object that follows the pipeline's JSON Schema
// (SchemaFile). Requests carry the schema in the vendor's structured-output
// form (OpenAI response_format json_schema; Anthropic a forced tool whose
// input_schema it is), and every answer is validated against it: one that
// does not follow it is dead-lettered as invalid_output, naming the rule.
const OutputJSONSchema Output = "json_schema"

// WantsJSON: the pipeline's answer must be one JSON object (output "json"
// or "json_schema").
func (p *Pipeline) WantsJSON() bool { return p.Output == OutputJSON || p.Output == OutputJSONSchema }

// schemaVendorsRefused are the vendors whose API has no structured-output
// form for a JSON Schema (only a JSON mode), with what to use instead.
var schemaVendorsRefused = map[string]string{
	"deepseek": "DeepSeek's API has JSON mode only (response_format json_object): use output = \"json\"",
}

// schemaURL is the address the compiled schema is known by; the schema
// must be self-contained (schemaLoader refuses every other address).
const schemaURL = "triage:///schema.json"

// schemaLoader refuses to load anything: a $ref outside the schema file
// would not reach the vendor, which gets the file's text alone.
type schemaLoader struct{}

func (schemaLoader) Load(string) (any, error) {
	return nil, errors.New("it is outside the schema file: the schema sent to the vendor must be self-contained (use $defs)")
}

// readSchemas reads each pipeline's schema_file (relative to dir, the
// configuration file's folder; "" is the working directory) into Schema,
// compacted. Errors name the file, the pipeline and the setting.
func (r rawFile) readSchemas(cfg *Config, name, dir string) error {
	for i := range cfg.Pipelines {
		p := &cfg.Pipelines[i]
		if p.SchemaFile == "" {
			continue
		}
		path := p.SchemaFile
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return fmt.Errorf("%s: %s: schema_file %q: %w", name, elem("pipelines", i, p.Name), p.SchemaFile, err)
		}
		p.Schema = b
	}
	return nil
}

// validateSchema checks output = "json_schema" and schema_file, compiles
// the schema (kept for CheckSchema) and compacts Schema to what is sent.
func (c *Config) validateSchema(v *validator, at string, p *Pipeline) {
	p.schema = nil
	if p.Output != OutputJSONSchema {
		if p.SchemaFile != "" || p.Schema != nil {
			v.addf(at, "schema_file is set but output is %q: set output = \"json_schema\" to send and check the schema", p.Output)
		}
		if p.SchemaStrict != nil {
			v.addf(at, "schema_strict is set but output is %q: it applies to output = \"json_schema\" only", p.Output)
		}
		return
	}
	if p.Schema == nil {
		v.addf(at, "output = \"json_schema\" needs schema_file: the JSON Schema file every answer must follow")
		return
	}
	src := p.SchemaSource()
	var doc any
	if err := json.Unmarshal(p.Schema, &doc); err != nil {
		v.addf(at, "%s is not JSON: %s", src, jsonErrorAt(p.Schema, err))
		return
	}
	if _, ok := doc.(map[string]any); !ok {
		v.addf(at, "%s must hold one JSON object (a JSON Schema), not %s", src, jsonKind(doc))
		return
	}
	if d, ok := doc.(map[string]any); ok && d["type"] != nil && d["type"] != "object" {
		v.addf(at, "%s: the schema's type must be \"object\" (the answer is one JSON object), got %v", src, d["type"])
		return
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.UseLoader(schemaLoader{})
	if err := comp.AddResource(schemaURL, doc); err != nil {
		v.addf(at, "%s: %v", src, err)
		return
	}
	sch, err := comp.Compile(schemaURL)
	if err != nil {
		v.addf(at, "%s is not a valid JSON Schema: %s", src, oneLine(strings.ReplaceAll(strings.ReplaceAll(err.Error(), schemaURL, "the schema"), "triage:///", "")))
		return
	}
	p.schema = sch
	var buf bytes.Buffer
	if json.Compact(&buf, p.Schema) == nil {
		p.Schema = buf.Bytes()
	}
	if m, err := c.Model(p.Model); err == nil {
		if k, err := c.Key(m.Key); err == nil {
			if why, refused := schemaVendorsRefused[k.Vendor]; refused {
				v.addf(at, "output = \"json_schema\" cannot be sent to model %q: its key %q is vendor %q, and %s", m.Name, k.Name, k.Vendor, why)
			}
		}
	}
}

// SchemaSource names the schema in messages: its file, or "schema" when
// the Config was built in Go.
func (p *Pipeline) SchemaSource() string {
	if p.SchemaFile != "" {
		return fmt.Sprintf("schema_file %q", p.SchemaFile)
	}
	return "schema"
}

// SchemaName is the name the schema is sent under (OpenAI json_schema.name,
// the Anthropic tool's name): the pipeline's name with every character
// outside letters, digits, '_' and '-' replaced by '_', at most 64.
func (p *Pipeline) SchemaName() string {
	s := nonSchemaName.ReplaceAllString(p.Name, "_")
	if s == "" {
		s = "answer"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

var nonSchemaName = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// Strict is OpenAI's json_schema.strict for the pipeline: SchemaStrict,
// true when unset.
func (p *Pipeline) Strict() bool { return p.SchemaStrict == nil || *p.SchemaStrict }

// CheckSchema validates an answer (one parsed JSON object) against the
// pipeline's schema. It returns "" when the answer follows it (or the
// pipeline has none), else which rule failed where, e.g.
// `at '/score': got string, want number (rule /properties/score/type)`.
// Safe for concurrent use once Validate has run.
func (p *Pipeline) CheckSchema(answer []byte) string {
	if p.schema == nil {
		return ""
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(answer))
	if err != nil {
		return "the answer is not JSON"
	}
	err = p.schema.Validate(inst)
	var ve *jsonschema.ValidationError
	if err == nil {
		return ""
	}
	if !errors.As(err, &ve) {
		return oneLine(err.Error())
	}
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	rule := ""
	if _, frag, ok := strings.Cut(leaf.SchemaURL, "#"); ok {
		rule = frag
	}
	if kw := leaf.ErrorKind.KeywordPath(); len(kw) > 0 {
		rule += "/" + strings.Join(kw, "/")
	}
	if rule == "" {
		rule = "/"
	}
	// A leaf's Error is "at '/score': got string, want number".
	return fmt.Sprintf("%s (rule %s)", oneLine(leaf.Error()), rule)
}

// jsonErrorAt says where in b a JSON error is: "line 3: invalid character ...".
func jsonErrorAt(b []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(b[:min(int(se.Offset), len(b))], []byte("\n"))
		return fmt.Sprintf("line %d: %v", line, err)
	}
	return err.Error()
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
