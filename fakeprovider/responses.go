package fakeprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// responsesAPI speaks the OpenAI Responses API (POST /v1/responses): the
// same keys, headers and HTTP errors as chat completions, a response
// object for an answer, typed stream events (response.created,
// response.output_text.delta, response.completed; response.failed,
// error and response.incomplete when it goes wrong) and background mode
// (background.go).
type responsesAPI struct{ openAI }

func (responsesAPI) answerID(r rnd) string { return "resp_" + r.text(50, hexdig) }

// responsesMinOutput is the smallest max_output_tokens the API accepts.
const responsesMinOutput = 16

type responsesRequest struct {
	Model           string            `json:"model"`
	Input           json.RawMessage   `json:"input"`
	Instructions    *string           `json:"instructions"`
	MaxOutputTokens *int              `json:"max_output_tokens"`
	Stream          bool              `json:"stream"`
	Background      bool              `json:"background"`
	Store           *bool             `json:"store"`
	Metadata        map[string]string `json:"metadata"`
	Text            *struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

func (v responsesAPI) parse(r *http.Request, body []byte, e *errInfo) (*call, *reply) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, v.errReply(e, http.StatusBadRequest, "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)",
			"invalid_request_error", nil, nil)
	}
	// store defaults to true in the Responses API.
	store := req.Store == nil || *req.Store
	c := &call{model: req.Model, stream: req.Stream, includeUsage: true, idemKey: r.Header.Get(IdempotencyHeader),
		store: store, metadata: req.Metadata, background: req.Background, textFormat: "text"}
	var sys []string
	if req.Instructions != nil && *req.Instructions != "" {
		sys = append(sys, *req.Instructions)
	}
	var s string
	if len(req.Input) > 0 && json.Unmarshal(req.Input, &s) == nil {
		c.messages, c.lastUser = []string{s}, s
	} else if len(req.Input) > 0 {
		var items []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(req.Input, &items)
		for _, m := range items {
			sys = c.addMessage(sys, m.Role, contentText(m.Content))
		}
	}
	c.system = strings.Join(sys, "\n")
	if t := req.Text; t != nil && t.Format != nil && t.Format.Type != "" {
		c.textFormat = t.Format.Type
		if t.Format.Type == "json_schema" && len(t.Format.Schema) > 0 {
			c.schema = t.Format.Schema
		}
	}
	c.wantsJSON = wantsJSON(c.system) || c.textFormat != "text"
	c.record = recordOf(r.Header.Get(RecordHeader), c.system, c.messages)
	c.inputTokens = estimateTokens(c.system, c.messages)
	if req.MaxOutputTokens != nil {
		c.maxTokens = *req.MaxOutputTokens
	}
	e.call = c
	switch {
	case req.Model == "":
		return c, v.errReply(e, http.StatusBadRequest, "Missing required parameter: 'model'.", "invalid_request_error", strp("model"), strp("missing_required_parameter"))
	case len(req.Input) == 0 || string(req.Input) == "null":
		return c, v.errReply(e, http.StatusBadRequest, "Missing required parameter: 'input'.", "invalid_request_error", strp("input"), strp("missing_required_parameter"))
	case req.MaxOutputTokens != nil && c.maxTokens < responsesMinOutput:
		return c, v.fail(ActionInvalidParam, Step{}, e)
	}
	return c, nil
}

func (v responsesAPI) fail(a Action, st Step, e *errInfo) *reply {
	if a != ActionInvalidParam {
		return v.openAI.fail(a, st, e)
	}
	got := -1
	if e.call != nil && e.call.maxTokens < responsesMinOutput {
		got = e.call.maxTokens
	}
	msg := fmt.Sprintf("Invalid 'max_output_tokens': integer below minimum value. Expected a value >= %d, but got %d instead.", responsesMinOutput, got)
	r := v.errReply(e, http.StatusBadRequest, msg, "invalid_request_error", strp("max_output_tokens"), strp("integer_below_min_value"))
	if st.Status != 0 {
		r.status = st.Status
	}
	return r
}

func (v responsesAPI) notFound(r *http.Request, e *errInfo) *reply {
	if r.URL.Path == "/v1/responses" {
		return v.errReply(e, http.StatusMethodNotAllowed, fmt.Sprintf("Invalid method for URL (%s %s)", r.Method, r.URL.Path), "invalid_request_error", nil, nil)
	}
	return v.openAI.notFound(r, e)
}

// The response object, in the API's field order.
type (
	respObject struct {
		ID                 string            `json:"id"`
		Object             string            `json:"object"`
		CreatedAt          int64             `json:"created_at"`
		Status             string            `json:"status"`
		Background         bool              `json:"background"`
		Error              *respError        `json:"error"`
		IncompleteDetails  *respIncomplete   `json:"incomplete_details"`
		Instructions       *string           `json:"instructions"`
		MaxOutputTokens    *int              `json:"max_output_tokens"`
		Model              string            `json:"model"`
		Output             []respItem        `json:"output"`
		ParallelToolCalls  bool              `json:"parallel_tool_calls"`
		PreviousResponseID *string           `json:"previous_response_id"`
		Store              bool              `json:"store"`
		Temperature        float64           `json:"temperature"`
		Text               respText          `json:"text"`
		ToolChoice         string            `json:"tool_choice"`
		Tools              []any             `json:"tools"`
		TopP               float64           `json:"top_p"`
		Truncation         string            `json:"truncation"`
		Usage              *respUsage        `json:"usage"`
		User               *string           `json:"user"`
		Metadata           map[string]string `json:"metadata"`
	}
	respError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	respIncomplete struct {
		Reason string `json:"reason"`
	}
	respText struct {
		Format struct {
			Type string `json:"type"`
		} `json:"format"`
	}
	respItem struct {
		ID      string        `json:"id"`
		Type    string        `json:"type"`
		Status  string        `json:"status"`
		Content []respContent `json:"content"`
		Role    string        `json:"role"`
	}
	respContent struct {
		Type        string `json:"type"`
		Annotations []any  `json:"annotations"`
		Text        string `json:"text"`
	}
	respUsage struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	}
)

// respState is what a response object shows besides its call: its id,
// status, the answer so far (nil while queued or in progress) and, for a
// failed one, its error; output overrides the answer's text (a failed
// stream's partial), usage the answer's tokens.
type respState struct {
	id, status string
	created    int64
	ans        *answer
	errCode    string
	text       *string
	usage      *respUsage
}

func usageOf(in, out int) *respUsage {
	u := &respUsage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
	return u
}

func messageID(respID string) string { return "msg_" + strings.TrimPrefix(respID, "resp_") }

// errorMessages are the texts the API gives the codes a failed response
// carries.
var errorMessages = map[string]string{
	"server_error":         "The server had an error while processing your request. Sorry about that!",
	"rate_limit_exceeded":  "Rate limit reached. Please try again later.",
	"insufficient_quota":   "You exceeded your current quota, please check your plan and billing details.",
	"server_is_overloaded": "Our servers are currently overloaded. Please try again later.",
	"invalid_prompt":       "Invalid prompt: your prompt was flagged as potentially violating our usage policy.",
}

func errorMessage(code string) string {
	if m, ok := errorMessages[code]; ok {
		return m
	}
	return "An error occurred while processing your request."
}

func (responsesAPI) object(c *call, st respState) respObject {
	o := respObject{ID: st.id, Object: "response", CreatedAt: st.created, Status: st.status, Background: c.background,
		Model: c.model, Output: []respItem{}, ParallelToolCalls: true, Store: c.store, Temperature: 1,
		ToolChoice: "auto", Tools: []any{}, TopP: 1, Truncation: "disabled", Metadata: map[string]string{}}
	for k, v := range c.metadata {
		o.Metadata[k] = v
	}
	if c.system != "" {
		o.Instructions = &c.system
	}
	if c.maxTokens > 0 {
		m := c.maxTokens
		o.MaxOutputTokens = &m
	}
	o.Text.Format.Type = c.textFormat
	if st.errCode != "" {
		o.Error = &respError{Code: st.errCode, Message: errorMessage(st.errCode)}
	}
	if a := st.ans; a != nil {
		if st.status == "incomplete" {
			o.IncompleteDetails = &respIncomplete{a.incomplete}
		}
		text := a.text
		if st.text != nil {
			text = *st.text
		}
		if st.status != "in_progress" && st.status != "queued" {
			itemStatus := "completed"
			if st.status != "completed" {
				itemStatus = "incomplete"
			}
			o.Output = []respItem{{ID: messageID(st.id), Type: "message", Status: itemStatus, Role: "assistant",
				Content: []respContent{{Type: "output_text", Annotations: []any{}, Text: text}}}}
			o.Usage = usageOf(a.inputTokens, a.outputTokens)
			if st.usage != nil {
				o.Usage = st.usage
			}
		}
	}
	return o
}

// finalStatus is the status a billed answer ends in.
func finalStatus(a *answer) string {
	if a.incomplete != "" {
		return "incomplete"
	}
	return "completed"
}

func (v responsesAPI) body(c *call, a *answer) []byte {
	return marshal(v.object(c, respState{id: a.id, status: finalStatus(a), created: a.created, ans: a}), "  ")
}

// Stream events, "type" and "sequence_number" first as the API sends them.
type (
	respEvent struct {
		Type           string     `json:"type"`
		SequenceNumber int        `json:"sequence_number"`
		Response       respObject `json:"response"`
	}
	respItemEvent struct {
		Type           string   `json:"type"`
		SequenceNumber int      `json:"sequence_number"`
		OutputIndex    int      `json:"output_index"`
		Item           respItem `json:"item"`
	}
	respPartEvent struct {
		Type           string      `json:"type"`
		SequenceNumber int         `json:"sequence_number"`
		ItemID         string      `json:"item_id"`
		OutputIndex    int         `json:"output_index"`
		ContentIndex   int         `json:"content_index"`
		Part           respContent `json:"part"`
	}
	respDeltaEvent struct {
		Type           string `json:"type"`
		SequenceNumber int    `json:"sequence_number"`
		ItemID         string `json:"item_id"`
		OutputIndex    int    `json:"output_index"`
		ContentIndex   int    `json:"content_index"`
		Delta          string `json:"delta"`
		Logprobs       []any  `json:"logprobs"`
	}
	respTextDoneEvent struct {
		Type           string `json:"type"`
		SequenceNumber int    `json:"sequence_number"`
		ItemID         string `json:"item_id"`
		OutputIndex    int    `json:"output_index"`
		ContentIndex   int    `json:"content_index"`
		Text           string `json:"text"`
		Logprobs       []any  `json:"logprobs"`
	}
	respErrorEvent struct {
		Type           string  `json:"type"`
		SequenceNumber int     `json:"sequence_number"`
		Code           string  `json:"code"`
		Message        string  `json:"message"`
		Param          *string `json:"param"`
	}
)

// stream numbers its frames from 0; a failure event appended after n frames
// is number n (failEvent).
func (v responsesAPI) stream(c *call, a *answer) (head, deltas, tail [][]byte) {
	seq := 0
	next := func() int { seq++; return seq - 1 }
	st := respState{id: a.id, status: "in_progress", created: a.created}
	mid := messageID(a.id)
	head = [][]byte{
		sseEvent("response.created", respEvent{"response.created", next(), v.object(c, st)}),
		sseEvent("response.in_progress", respEvent{"response.in_progress", next(), v.object(c, st)}),
		sseEvent("response.output_item.added", respItemEvent{"response.output_item.added", next(), 0,
			respItem{ID: mid, Type: "message", Status: "in_progress", Content: []respContent{}, Role: "assistant"}}),
		sseEvent("response.content_part.added", respPartEvent{"response.content_part.added", next(), mid, 0, 0,
			respContent{Type: "output_text", Annotations: []any{}}}),
	}
	for _, p := range chunks(a.text) {
		deltas = append(deltas, sseEvent("response.output_text.delta", respDeltaEvent{"response.output_text.delta", next(), mid, 0, 0, p, []any{}}))
	}
	status := finalStatus(a)
	itemStatus := "completed"
	if status != "completed" {
		itemStatus = "incomplete"
	}
	part := respContent{Type: "output_text", Annotations: []any{}, Text: a.text}
	tail = [][]byte{
		sseEvent("response.output_text.done", respTextDoneEvent{"response.output_text.done", next(), mid, 0, 0, a.text, []any{}}),
		sseEvent("response.content_part.done", respPartEvent{"response.content_part.done", next(), mid, 0, 0, part}),
		sseEvent("response.output_item.done", respItemEvent{"response.output_item.done", next(), 0,
			respItem{ID: mid, Type: "message", Status: itemStatus, Content: []respContent{part}, Role: "assistant"}}),
	}
	final := v.object(c, respState{id: a.id, status: status, created: a.created, ans: a})
	name := "response.completed"
	if status == "incomplete" {
		name = "response.incomplete"
	}
	tail = append(tail, sseEvent(name, respEvent{name, next(), final}))
	return head, deltas, tail
}

// failEvent ends a Responses-API stream that failed after generated content
// chunks, as event number seq: response.failed carrying the error code and
// the usage of what was generated (what the call is billed), or, with
// Step.Event "error", an error event.
func (v responsesAPI) failEvent(c *call, a *answer, st Step, seq, generated int) []byte {
	code := st.Code
	if code == "" {
		code = "server_error"
	}
	if st.Event == "error" {
		return sseEvent("error", respErrorEvent{Type: "error", SequenceNumber: seq, Code: code, Message: errorMessage(code)})
	}
	text := generatedText(a.text, generated)
	obj := v.object(c, respState{id: a.id, status: "failed", created: a.created, ans: a, errCode: code, text: &text,
		usage: usageOf(a.inputTokens, outputTokens(text))})
	return sseEvent("response.failed", respEvent{"response.failed", seq, obj})
}

// streamError is what a failed stream ends with when the step names
// nothing: response.failed with server_error. The Server calls failEvent.
func (v responsesAPI) streamError(e *errInfo) []byte {
	return sseEvent("error", respErrorEvent{Type: "error", Code: "server_error", Message: errorMessage("server_error")})
}
