package fakeprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// anthropic speaks the Messages API. Error texts are the ones the API sends, as
// captured in public issue reports (see testdata/anthropic).
type anthropic struct{}

func (anthropic) name() string { return "anthropic" }

// refusalIsAnswer: Anthropic answers a policy block with a 200 whose
// stop_reason is "refusal", and bills it.
func (anthropic) refusalIsAnswer() bool { return true }

func (anthropic) requestID(r rnd) string { return "req_011C" + r.text(20, base58) }

func (anthropic) answerID(r rnd) string { return "msg_01" + r.text(22, base58) }

type anthropicError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func anthropicErrorBody(typ, msg, reqID string) []byte {
	return marshal(struct {
		Type      string         `json:"type"`
		Error     anthropicError `json:"error"`
		RequestID string         `json:"request_id"`
	}{"error", anthropicError{typ, msg}, reqID}, "")
}

func (v anthropic) errReply(e *errInfo, status int, typ, msg string) *reply {
	return newReply(v, e, status, anthropicErrorBody(typ, msg, e.reqID))
}

func (v anthropic) auth(r *http.Request, want string, e *errInfo) *reply {
	// The API takes the key as x-api-key; the v2 Go SDK sends it as a bearer
	// token instead, and the API accepts that too.
	key := strings.TrimSpace(r.Header.Get("x-api-key"))
	if key == "" {
		if k, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			key = strings.TrimSpace(k)
		}
	}
	e.key = key
	switch {
	case key == "":
		return v.errReply(e, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
	case want != "" && key != want:
		return v.fail(ActionUnauthorized, Step{}, e)
	case r.Header.Get("anthropic-version") == "":
		return v.errReply(e, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
	}
	return nil
}

type anthropicRequest struct {
	Model     *string         `json:"model"`
	MaxTokens *int            `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  *[]struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream bool `json:"stream"`
	// Tools and ToolChoice: a forced tool carries a JSON Schema (schema.go).
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
}

// anthropicMaxOutput is the output cap the invalid_param message cites.
const anthropicMaxOutput = 64000

func (v anthropic) parse(r *http.Request, body []byte, e *errInfo) (*call, *reply) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, v.errReply(e, http.StatusBadRequest, "invalid_request_error", "There was an issue with the format or content of your request. The request body is not valid JSON.")
	}
	c := &call{stream: req.Stream, idemKey: r.Header.Get(IdempotencyHeader)}
	if req.Model != nil {
		c.model = *req.Model
	}
	if req.MaxTokens != nil {
		c.maxTokens = *req.MaxTokens
	}
	c.system = contentText(req.System)
	if req.Messages != nil {
		for _, m := range *req.Messages {
			t := contentText(m.Content)
			c.messages = append(c.messages, t)
			if m.Role == "user" {
				c.lastUser = t
			}
		}
	}
	c.wantsJSON = wantsJSON(c.system)
	if tc := req.ToolChoice; tc != nil && tc.Type == "tool" {
		for _, t := range req.Tools {
			if t.Name == tc.Name && len(t.InputSchema) > 0 {
				c.schema, c.tool, c.wantsJSON = t.InputSchema, t.Name, true
			}
		}
	}
	c.record = recordOf(r.Header.Get(RecordHeader), c.system, c.messages)
	c.inputTokens = estimateTokens(c.system, c.messages)
	e.call = c
	switch {
	case req.Model == nil:
		return c, v.errReply(e, http.StatusBadRequest, "invalid_request_error", "model: Field required")
	case req.MaxTokens == nil:
		return c, v.errReply(e, http.StatusBadRequest, "invalid_request_error", "max_tokens: Field required")
	case req.Messages == nil:
		return c, v.errReply(e, http.StatusBadRequest, "invalid_request_error", "messages: Field required")
	case c.maxTokens > anthropicMaxOutput:
		return c, v.fail(ActionInvalidParam, Step{}, e)
	}
	return c, nil
}

func (v anthropic) fail(a Action, st Step, e *errInfo) *reply {
	model := e.model("claude-sonnet-4-5")
	var r *reply
	switch a {
	case ActionRateLimit, ActionTooLarge:
		limit, unit := 30000, "input tokens"
		if hit := e.hit; hit != nil {
			limit = hit.limit
			if hit.kind == "requests" {
				unit = "requests"
			}
		} else if e.rate != nil && e.rate.rpm > 0 {
			limit, unit = e.rate.rpm, "requests"
		}
		msg := fmt.Sprintf("This request would exceed the rate limit for your organization (%s) of %s %s per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase.",
			e.orgID, thousands(limit), unit)
		r = v.errReply(e, http.StatusTooManyRequests, "rate_limit_error", msg)
		wait := e.retryAfter
		if a == ActionTooLarge {
			// The API words this like any rate limit and hints a wait; a full
			// bucket is a minute away.
			wait = time.Minute
		}
		retryHeaders(r.header, wait)
	case ActionExhausted:
		r = v.errReply(e, http.StatusBadRequest, "invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")
	case ActionOverloaded:
		r = v.errReply(e, 529, "overloaded_error", "Overloaded")
		retryHeaders(r.header, e.retryAfter)
	case ActionServerError:
		r = v.errReply(e, http.StatusInternalServerError, "api_error", "Internal server error")
		retryHeaders(r.header, e.retryAfter)
	case ActionUnauthorized:
		r = v.errReply(e, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
	case ActionContextLength:
		limit := e.ctxLimit
		if limit == 0 {
			limit = 200000
		}
		got := limit + 1
		if e.call != nil && e.call.inputTokens > limit {
			got = e.call.inputTokens
		}
		r = v.errReply(e, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("prompt is too long: %d tokens > %d maximum", got, limit))
	case ActionInvalidParam:
		got := anthropicMaxOutput + 1
		if e.call != nil && e.call.maxTokens > anthropicMaxOutput {
			got = e.call.maxTokens
		}
		r = v.errReply(e, http.StatusBadRequest, "invalid_request_error",
			fmt.Sprintf("max_tokens: %d > %d, which is the maximum allowed number of output tokens for %s", got, anthropicMaxOutput, model))
	default:
		panic("fakeprovider: anthropic has no error for action " + string(a))
	}
	if st.Status != 0 {
		r.status = st.Status
	}
	return r
}

// thousands formats 30000 as "30,000", as the rate-limit message does.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func (v anthropic) notFound(r *http.Request, e *errInfo) *reply {
	return v.errReply(e, http.StatusNotFound, "not_found_error", "Not Found")
}

func (anthropic) headers(h http.Header, e *errInfo) {
	h.Set("request-id", e.reqID)
	h.Set("anthropic-organization-id", e.orgID)
	if rt := e.rate; rt != nil && !rt.hidden {
		set := func(name string, limit, left int, reset string) {
			h.Set("anthropic-ratelimit-"+name+"-limit", strconv.Itoa(limit))
			h.Set("anthropic-ratelimit-"+name+"-remaining", strconv.Itoa(left))
			h.Set("anthropic-ratelimit-"+name+"-reset", reset)
		}
		if rt.rpm > 0 {
			set("requests", rt.rpm, rt.reqLeft, rt.now.Add(rt.reqReset).UTC().Format("2006-01-02T15:04:05Z"))
		}
		if rt.tpm > 0 {
			reset := rt.now.Add(rt.tokReset).UTC().Format("2006-01-02T15:04:05Z")
			set("tokens", rt.tpm, rt.tokLeft, reset)
			set("input-tokens", rt.tpm, rt.tokLeft, reset)
		}
	}
}

type anthropicUsage struct {
	InputTokens              int    `json:"input_tokens"`
	CacheCreationInputTokens int    `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int    `json:"cache_read_input_tokens"`
	OutputTokens             int    `json:"output_tokens"`
	ServiceTier              string `json:"service_tier"`
}

type anthropicText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicMessage struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []any          `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

// anthropicToolUse is the tool_use block that answers a forced tool.
type anthropicToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// anthropicToolStart is a tool_use block as content_block_start opens it.
type anthropicToolStart struct {
	Type  string   `json:"type"`
	ID    string   `json:"id"`
	Name  string   `json:"name"`
	Input struct{} `json:"input"`
}

// anthropicJSONDelta is a streamed piece of a tool's input.
type anthropicJSONDelta struct {
	Type        string `json:"type"`
	PartialJSON string `json:"partial_json"`
}

// toolUseID derives a tool_use id from the message id.
func toolUseID(a *answer) string { return "toolu_01" + strings.TrimPrefix(a.id, "msg_01") }

func stopReason(a *answer) string {
	if a.refusal || a.incomplete == "content_filter" {
		return "refusal"
	}
	if a.incomplete == "max_output_tokens" {
		return "max_tokens"
	}
	if a.tool != "" {
		return "tool_use"
	}
	return "end_turn"
}

func (anthropic) body(c *call, a *answer) []byte {
	content := []any{}
	switch {
	case a.tool != "" && a.text != "":
		content = append(content, anthropicToolUse{Type: "tool_use", ID: toolUseID(a), Name: a.tool, Input: json.RawMessage(a.text)})
	case a.text != "":
		content = append(content, anthropicText{"text", a.text})
	}
	sr := stopReason(a)
	return marshal(anthropicMessage{ID: a.id, Type: "message", Role: "assistant", Model: a.model, Content: content,
		StopReason: &sr, Usage: anthropicUsage{InputTokens: a.inputTokens, OutputTokens: a.outputTokens, ServiceTier: "standard"}}, "")
}

func sseEvent(name string, v any) []byte {
	b := []byte("event: " + name + "\ndata: ")
	return append(append(b, marshal(v, "")...), '\n', '\n')
}

// Stream events are structs, not maps, so fields go out in the API's order
// ("type" first).
type (
	anthropicMessageStart struct {
		Type    string           `json:"type"`
		Message anthropicMessage `json:"message"`
	}
	anthropicBlockStart struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}
	anthropicBlockDelta struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}
	anthropicBlockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	anthropicMessageDelta struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	anthropicType struct {
		Type string `json:"type"`
	}
)

func (anthropic) stream(c *call, a *answer) (head, deltas, tail [][]byte) {
	start := anthropicMessage{ID: a.id, Type: "message", Role: "assistant", Model: a.model, Content: []any{},
		Usage: anthropicUsage{InputTokens: a.inputTokens, OutputTokens: 1, ServiceTier: "standard"}}
	head = append(head, sseEvent("message_start", anthropicMessageStart{"message_start", start}))
	if a.text != "" && a.tool != "" {
		head = append(head,
			sseEvent("content_block_start", anthropicBlockStart{"content_block_start", 0, anthropicToolStart{Type: "tool_use", ID: toolUseID(a), Name: a.tool}}),
			[]byte("event: ping\ndata: {\"type\": \"ping\"}\n\n"))
		for _, p := range chunks(a.text) {
			deltas = append(deltas, sseEvent("content_block_delta", anthropicBlockDelta{"content_block_delta", 0, anthropicJSONDelta{"input_json_delta", p}}))
		}
		tail = append(tail, sseEvent("content_block_stop", anthropicBlockStop{"content_block_stop", 0}))
	} else if a.text != "" {
		head = append(head,
			sseEvent("content_block_start", anthropicBlockStart{"content_block_start", 0, anthropicText{"text", ""}}),
			[]byte("event: ping\ndata: {\"type\": \"ping\"}\n\n"))
		for _, p := range chunks(a.text) {
			deltas = append(deltas, sseEvent("content_block_delta", anthropicBlockDelta{"content_block_delta", 0, anthropicText{"text_delta", p}}))
		}
		tail = append(tail, sseEvent("content_block_stop", anthropicBlockStop{"content_block_stop", 0}))
	}
	md := anthropicMessageDelta{Type: "message_delta"}
	md.Delta.StopReason = stopReason(a)
	md.Usage.OutputTokens = a.outputTokens
	tail = append(tail, sseEvent("message_delta", md), sseEvent("message_stop", anthropicType{"message_stop"}))
	return head, deltas, tail
}

// streamError is the event the API sends when a stream fails after its 200;
// the connection closes after it, without message_stop.
func (anthropic) streamError(e *errInfo) []byte {
	return append(append([]byte("event: error\ndata: "), anthropicErrorBody("overloaded_error", "Overloaded", e.reqID)...), '\n', '\n')
}
