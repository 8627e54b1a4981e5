package fakeprovider

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
)

// A request may carry a JSON Schema: OpenAI's response_format json_schema,
// or an Anthropic tool forced by tool_choice (its input_schema). The fake
// then answers with a JSON object built from the schema (schemaAnswer), in
// the wire form the vendor uses (Anthropic: a tool_use block), or, for the
// off_schema action, with one that breaks it (offSchemaAnswer).

// answerFields are the values every answer is made of, all derived from the
// last user message as answerText's are.
type answerFields struct {
	id     string
	hasID  bool
	label  string
	score  float64
	digest string
	pick   int
}

func fieldsOf(lastUser string) answerFields {
	sum := sha256.Sum256([]byte(lastUser))
	f := answerFields{digest: hex.EncodeToString(sum[:4]), label: labels[sum[4]%byte(len(labels))],
		score: float64(binary.BigEndian.Uint16(sum[5:7])%101) / 100, pick: int(sum[7])}
	f.id, f.hasID = echoedID(lastUser)
	return f
}

// schemaAnswer is a JSON object that follows schema: every property is
// filled (a const or an enum value, the record id for "id", the digest for
// "digest", a label for other strings, the score for numbers, its
// percentage for integers), one item per array, $defs references followed.
// A schema it cannot read gets the plain JSON answer.
func schemaAnswer(schema json.RawMessage, lastUser string) string {
	var root map[string]any
	if json.Unmarshal(schema, &root) != nil {
		return answerText(lastUser, true)
	}
	v := fillSchema(root, root, "", fieldsOf(lastUser), 0)
	if _, ok := v.(map[string]any); !ok {
		return answerText(lastUser, true)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// offSchemaAnswer is schemaAnswer without the schema's required
// properties and with "off_schema": true added: it breaks any schema that
// requires a property or refuses additional ones.
func offSchemaAnswer(schema json.RawMessage, lastUser string) string {
	var obj map[string]any
	if json.Unmarshal([]byte(schemaAnswer(schema, lastUser)), &obj) != nil {
		obj = map[string]any{}
	}
	var root struct {
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &root)
	for _, r := range root.Required {
		delete(obj, r)
	}
	obj["off_schema"] = true
	b, _ := json.Marshal(obj)
	return string(b)
}

// ExpectedSchemaAnswer is the text the fake answers to a request carrying
// schema whose last user message is lastUser; offSchema: the off_schema
// action's answer.
func ExpectedSchemaAnswer(lastUser string, schema json.RawMessage, offSchema bool) string {
	if offSchema {
		return offSchemaAnswer(schema, lastUser)
	}
	return schemaAnswer(schema, lastUser)
}

func fillSchema(node, root map[string]any, name string, f answerFields, depth int) any {
	if depth > 8 {
		return nil
	}
	if ref, ok := node["$ref"].(string); ok {
		if def, ok := strings.CutPrefix(ref, "#/$defs/"); ok {
			if defs, ok := root["$defs"].(map[string]any); ok {
				if d, ok := defs[def].(map[string]any); ok {
					return fillSchema(d, root, name, f, depth+1)
				}
			}
		}
		return nil
	}
	if c, ok := node["const"]; ok {
		return c
	}
	if e, ok := node["enum"].([]any); ok && len(e) > 0 {
		return e[f.pick%len(e)]
	}
	for _, alt := range []string{"anyOf", "oneOf", "allOf"} {
		if as, ok := node[alt].([]any); ok && len(as) > 0 {
			if a, ok := as[0].(map[string]any); ok {
				return fillSchema(a, root, name, f, depth+1)
			}
		}
	}
	typ, _ := node["type"].(string)
	if ts, ok := node["type"].([]any); ok {
		for _, t := range ts {
			if s, _ := t.(string); s != "null" {
				typ = s
				break
			}
		}
	}
	if typ == "" && node["properties"] != nil {
		typ = "object"
	}
	switch typ {
	case "object":
		obj := map[string]any{}
		props, _ := node["properties"].(map[string]any)
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if p, ok := props[k].(map[string]any); ok {
				obj[k] = fillSchema(p, root, k, f, depth+1)
			}
		}
		return obj
	case "array":
		if it, ok := node["items"].(map[string]any); ok {
			return []any{fillSchema(it, root, name, f, depth+1)}
		}
		return []any{}
	case "number":
		return f.score
	case "integer":
		return int(f.score * 100)
	case "boolean":
		return f.score >= 0.5
	case "null":
		return nil
	}
	switch {
	case name == "id" && f.hasID:
		return f.id
	case name == "digest":
		return f.digest
	}
	return f.label
}
