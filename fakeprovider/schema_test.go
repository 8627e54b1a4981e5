package fakeprovider_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

const answerSchema = `{"type":"object","properties":{"id":{"type":"string"},"label":{"type":"string"},` +
	`"score":{"type":"number"},"tags":{"type":"array","items":{"enum":["a","b"]}},"kind":{"const":"record"}},` +
	`"required":["id","label","score"],"additionalProperties":false}`

// schemaBody is a request carrying answerSchema: OpenAI's response_format
// json_schema, or an Anthropic forced tool.
func schemaBody(vendor, id string, stream bool) string {
	s := "false"
	if stream {
		s = "true"
	}
	user := `"messages":[{"role":"user","content":"Record: {\"id\":\"` + id + `\"}"}]`
	if vendor == "anthropic" {
		return `{"model":"claude-sonnet-4-5","max_tokens":512,"stream":` + s + `,` + user +
			`,"tools":[{"name":"enrich","description":"d","input_schema":` + answerSchema + `}],"tool_choice":{"type":"tool","name":"enrich"}}`
	}
	return `{"model":"gpt-4o-mini","stream":` + s + `,` + user +
		`,"response_format":{"type":"json_schema","json_schema":{"name":"enrich","schema":` + answerSchema + `,"strict":true}}}`
}

// TestSchemaAnswers: a request carrying a JSON Schema gets an answer built
// from it (Anthropic: the forced tool's tool_use block), and off_schema
// answers one that breaks it; both are billed answers.
func TestSchemaAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{RecordScripts: map[string][]fakeprovider.Step{"bad": acts(fakeprovider.ActionOffSchema)}})
	lastUser := `Record: {"id":"r1"}`
	want := fakeprovider.ExpectedSchemaAnswer(lastUser, json.RawMessage(answerSchema), false)
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(want), &obj))
	require.Equal(t, "r1", obj["id"], "the record id fills the id property")
	require.Equal(t, "record", obj["kind"])
	require.Len(t, obj["tags"], 1)
	require.IsType(t, float64(0), obj["score"])

	r, err := b.post(t, ctxT(t), "openai", schemaBody("openai", "r1", false), map[string]string{fakeprovider.RecordHeader: "r1"})
	require.NoError(t, err)
	require.Equal(t, 200, r.status, r.body)
	var oa struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &oa))
	require.JSONEq(t, want, oa.Choices[0].Message.Content)

	r, err = b.post(t, ctxT(t), "anthropic", schemaBody("anthropic", "r1", false), map[string]string{fakeprovider.RecordHeader: "r1"})
	require.NoError(t, err)
	require.Equal(t, 200, r.status, r.body)
	var an struct {
		Content []struct {
			Type  string          `json:"type"`
			Name  string          `json:"name"`
			ID    string          `json:"id"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &an))
	require.Len(t, an.Content, 1)
	require.Equal(t, "tool_use", an.Content[0].Type)
	require.Equal(t, "enrich", an.Content[0].Name)
	require.True(t, strings.HasPrefix(an.Content[0].ID, "toolu_"))
	require.JSONEq(t, want, string(an.Content[0].Input))
	require.Equal(t, "tool_use", an.StopReason)

	r, err = b.post(t, ctxT(t), "anthropic", schemaBody("anthropic", "r1", true), map[string]string{fakeprovider.RecordHeader: "r1s"})
	require.NoError(t, err)
	require.Contains(t, r.body, `"type":"input_json_delta"`)
	require.Contains(t, r.body, `"stop_reason":"tool_use"`)

	r, err = b.post(t, ctxT(t), "openai", schemaBody("openai", "bad", false), map[string]string{fakeprovider.RecordHeader: "bad"})
	require.NoError(t, err)
	require.Equal(t, 200, r.status)
	require.NoError(t, json.Unmarshal([]byte(r.body), &oa))
	off := oa.Choices[0].Message.Content
	require.JSONEq(t, fakeprovider.ExpectedSchemaAnswer(`Record: {"id":"bad"}`, json.RawMessage(answerSchema), true), off)
	require.NotContains(t, off, `"id"`, "the required properties are left out")
	require.Contains(t, off, `"off_schema":true`)

	st := b.fp.Stats()
	require.Equal(t, 4, st.BilledCalls)
	require.Equal(t, 1, st.ByAction[fakeprovider.ActionOffSchema])
}
