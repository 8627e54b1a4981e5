package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
)

const testSchema = `{"type":"object","properties":{"label":{"type":"string"}},"required":["label"],"additionalProperties":false}`

func schemaRequest() Request {
	r := baseRequest()
	r.Schema, r.SchemaName, r.SchemaStrict = json.RawMessage(testSchema), "enrich", true
	r.IdempotencyKey = IdempotencyKey("b1", r.RecordID, "enrich", RequestHash(r))
	return r
}

// TestSchemaOpenAI: a schema goes out as response_format json_schema with
// its name, the schema itself and strict.
func TestSchemaOpenAI(t *testing.T) {
	t.Parallel()
	b := setup(t, "openai", 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		var schema any
		require.NoError(t, json.Unmarshal([]byte(testSchema), &schema))
		require.Equal(t, map[string]any{"type": "json_schema", "json_schema": map[string]any{
			"name": "enrich", "schema": schema, "strict": true}}, body["response_format"])
		require.NotContains(t, body, "tools")
		fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,
			"message":{"role":"assistant","content":"{\"label\":\"x\"}"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`)
	})
	res, err := b.client.Do(context.Background(), schemaRequest())
	require.NoError(t, err)
	require.Equal(t, `{"label":"x"}`, res.Content)
}

// TestSchemaAnthropic: Anthropic has no schema switch in messages: the
// schema is one tool's input_schema, the tool is forced, and the tool_use
// input is the answer.
func TestSchemaAnthropic(t *testing.T) {
	t.Parallel()
	b := setup(t, "anthropic", 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		var schema any
		require.NoError(t, json.Unmarshal([]byte(testSchema), &schema))
		require.Equal(t, []any{map[string]any{"name": "enrich", "description": SchemaToolDescription, "input_schema": schema}}, body["tools"])
		require.Equal(t, map[string]any{"type": "tool", "name": "enrich"}, body["tool_choice"])
		require.NotContains(t, body, "response_format")
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5",
			"content":[{"type":"tool_use","id":"toolu_1","name":"enrich","input":{"label":"x"}}],
			"stop_reason":"tool_use","usage":{"input_tokens":20,"output_tokens":7}}`)
	})
	req := schemaRequest()
	req.Model = "claude-haiku-4-5"
	res, err := b.client.Do(context.Background(), req)
	require.NoError(t, err)
	require.JSONEq(t, `{"label":"x"}`, res.Content)
	require.Equal(t, "tool_use", res.FinishReason)
	require.Equal(t, classify.OK, classify.Classify(res.Observation).Class)
}

// TestSchemaAnthropicStream: streamed, the tool's input arrives as
// input_json_delta pieces, assembled into Content.
func TestSchemaAnthropicStream(t *testing.T) {
	t.Parallel()
	b := setup(t, "anthropic", 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n",
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"enrich\",\"input\":{}}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"label\\\": \"}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"x\\\"}\"}}\n\n",
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	})
	req := schemaRequest()
	req.Stream = true
	res, err := b.client.Do(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, classify.PhaseResponse, res.Observation.Phase)
	require.JSONEq(t, `{"label":"x"}`, res.Content)
}

// TestSchemaRequestChecks: a schema changes the request's identity, needs a
// name both vendors accept and must be a JSON object.
func TestSchemaRequestChecks(t *testing.T) {
	t.Parallel()
	r := schemaRequest()
	plain := baseRequest()
	require.NotEqual(t, RequestHash(plain), RequestHash(r))
	other := r
	other.Schema = json.RawMessage(`{"type":"object"}`)
	require.NotEqual(t, RequestHash(r), RequestHash(other))

	for name, mutate := range map[string]func(*Request){
		"no name":    func(r *Request) { r.SchemaName = "" },
		"bad name":   func(r *Request) { r.SchemaName = "my schema" },
		"not object": func(r *Request) { r.Schema = json.RawMessage(`[1]`) },
		"no json":    func(r *Request) { r.JSON = false },
	} {
		c := r
		mutate(&c)
		_, err := RequestBody(FormatOpenAI, c)
		require.ErrorIs(t, err, ErrInvalidRequest, name)
	}
}
