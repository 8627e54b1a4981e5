package provider

import (
	"encoding/json"
	"strings"
)

// The OpenAI Responses API (FormatResponses): POST {base_url}/responses
// with the prompt as input and the system prompt as instructions; the
// answer is a response object whose output messages hold output_text
// parts. A response can fail inside a 200: status "failed" with
// error.code, "incomplete" with incomplete_details.reason; a stream ends
// with response.completed, response.incomplete, response.failed or an
// error event. Those bodies go to the classifier as they are (see
// classify's Responses-API reading); this file only renders and decodes.

type responsesRequest struct {
	Model           string            `json:"model"`
	Instructions    string            `json:"instructions,omitempty"`
	Input           string            `json:"input"`
	MaxOutputTokens int               `json:"max_output_tokens"`
	Temperature     *float64          `json:"temperature,omitempty"`
	Text            *responsesText    `json:"text,omitempty"`
	Stream          bool              `json:"stream,omitempty"`
	Background      bool              `json:"background,omitempty"`
	Store           bool              `json:"store"`
	Metadata        map[string]string `json:"metadata"`
}

// responsesText carries the output format: json_object, or json_schema
// with its name, schema and strictness (flat, unlike chat completions).
type responsesText struct {
	Format responsesFormat `json:"format"`
}

type responsesFormat struct {
	Type   string          `json:"type"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict *bool           `json:"strict,omitempty"`
}

// responsesBody renders r for the Responses API. store is sent always,
// false unless the call must be kept at the provider (Request.Store, or
// background mode, which needs it): the API's default is true, which
// would keep every answer at the provider. metadata always carries the
// idempotency key, so a kept response can be told apart.
func responsesBody(r Request) responsesRequest {
	rr := responsesRequest{
		Model: r.Model, Instructions: r.System, Input: r.Prompt, MaxOutputTokens: r.MaxTokens,
		Temperature: r.Temperature, Stream: r.Stream, Background: r.Background && !r.Stream,
		Store:    r.Store || (r.Background && !r.Stream),
		Metadata: map[string]string{MetadataIdempotencyKey: r.IdempotencyKey},
	}
	switch {
	case r.JSON && r.Schema != nil:
		strict := r.SchemaStrict
		rr.Text = &responsesText{responsesFormat{Type: "json_schema", Name: r.SchemaName, Schema: r.Schema, Strict: &strict}}
	case r.JSON:
		rr.Text = &responsesText{responsesFormat{Type: "json_object"}}
	}
	return rr
}

// responsesResponse is a response object, as answered, polled or carried
// by a stream event.
type responsesResponse struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Status string `json:"status"`
	Output []struct {
		Type    string `json:"type"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// text is the response's output text: every output_text part of its
// message items, in order.
func (rr *responsesResponse) text() string {
	var sb strings.Builder
	for _, item := range rr.Output {
		if item.Type != "message" {
			continue
		}
		for _, p := range item.Content {
			if p.Type == "output_text" {
				sb.WriteString(p.Text)
			}
		}
	}
	return sb.String()
}

// fill copies what the response says into res.
func (rr *responsesResponse) fill(res *Result) {
	res.ResponseID, res.ResponseStatus = rr.ID, rr.Status
	res.Content = rr.text()
	res.FinishReason = rr.Status
	if rr.Status == "incomplete" && rr.IncompleteDetails != nil && rr.IncompleteDetails.Reason != "" {
		res.FinishReason = rr.IncompleteDetails.Reason
	}
	if rr.Usage != nil {
		res.InputTokens, res.OutputTokens = rr.Usage.InputTokens, rr.Usage.OutputTokens
	}
}

// decodeResponses decodes a complete 2xx response object. A body that is
// not one (no object "response", no status) is Malformed. A failed or
// incomplete response decodes like any other; the classifier reads its
// status from Observation.Body.
func decodeResponses(b []byte, res *Result) {
	var rr responsesResponse
	if err := json.Unmarshal(b, &rr); err != nil {
		res.Malformed = "2xx body is not JSON"
		return
	}
	if rr.Object != "response" || rr.Status == "" {
		res.Malformed = "2xx body is not a Responses-API response object"
		return
	}
	rr.fill(res)
}

// responsesEvent is one Responses-API stream event: its type, a text
// delta, or the response a lifecycle event carries.
type responsesEvent struct {
	Type     string             `json:"type"`
	Delta    string             `json:"delta"`
	Response *responsesResponse `json:"response"`
}

// responsesStreamEvent reads one event of a Responses-API stream. The
// stream is done at response.completed or response.incomplete, whose
// response becomes Observation.Body (the shape a synchronous call
// answers, so one classifier path reads both); it fails at
// response.failed (whose usage says what was billed) or an error event,
// and the stream text stays the body.
func responsesStreamEvent(event, data string, st *streamState, res *Result) {
	var ev responsesEvent
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		st.failed = true
		return
	}
	if ev.Type == "" {
		ev.Type = event
	}
	switch ev.Type {
	case "response.output_text.delta":
		st.content.WriteString(ev.Delta)
	case "response.created", "response.in_progress", "response.queued":
		if ev.Response != nil {
			res.ResponseID, res.ResponseStatus = ev.Response.ID, ev.Response.Status
		}
	case "response.completed", "response.incomplete":
		st.done = true
		if ev.Response != nil {
			ev.Response.fill(res)
			if raw := responseOf(data); raw != "" {
				st.final = raw
			}
		}
	case "response.failed":
		st.failed = true
		if ev.Response != nil {
			// The partial text is what the deltas carried.
			res.ResponseID, res.ResponseStatus, res.FinishReason = ev.Response.ID, ev.Response.Status, ev.Response.Status
			if u := ev.Response.Usage; u != nil {
				res.InputTokens, res.OutputTokens = u.InputTokens, u.OutputTokens
			}
		}
	case "error":
		st.failed = true
	}
}

// responseOf is the raw response object a lifecycle event carries.
func responseOf(data string) string {
	var ev struct {
		Response json.RawMessage `json:"response"`
	}
	if json.Unmarshal([]byte(data), &ev) != nil {
		return ""
	}
	return string(ev.Response)
}
