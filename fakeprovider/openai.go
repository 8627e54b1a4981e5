package fakeprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// openAI speaks chat completions. Error texts are the ones the API sends, as
// captured in public issue reports (see testdata/openai).
type openAI struct{}

func (openAI) name() string { return "openai" }

func (openAI) refusalIsAnswer() bool { return false }

func (openAI) requestID(r rnd) string { return "req_" + r.text(32, hexdig) }

func (openAI) answerID(r rnd) string { return "chatcmpl-" + r.text(29, alnum) }

type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func strp(s string) *string { return &s }

// openAIErrorBody is pretty-printed with four spaces, as the API sends errors.
func openAIErrorBody(msg, typ string, param, code *string) []byte {
	return marshal(struct {
		Error openAIError `json:"error"`
	}{openAIError{msg, typ, param, code}}, "    ")
}

func (v openAI) errReply(e *errInfo, status int, msg, typ string, param, code *string) *reply {
	return newReply(v, e, status, openAIErrorBody(msg, typ, param, code))
}

func (v openAI) auth(r *http.Request, want string, e *errInfo) *reply {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	key = strings.TrimSpace(key)
	e.key = key
	if !ok || key == "" {
		return v.errReply(e, http.StatusUnauthorized, "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username and password. You can obtain an API key from https://platform.openai.com/account/api-keys.",
			"invalid_request_error", nil, nil)
	}
	if want != "" && key != want {
		return v.fail(ActionUnauthorized, Step{}, e)
	}
	return nil
}

type openAIRequest struct {
	Model    string `json:"model"`
	Messages *[]struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	ResponseFormat      *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	// Store and Metadata: a stored completion (stored.go).
	Store    bool              `json:"store"`
	Metadata map[string]string `json:"metadata"`
}

func (v openAI) parse(r *http.Request, body []byte, e *errInfo) (*call, *reply) {
	var req openAIRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, v.errReply(e, http.StatusBadRequest, "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)",
			"invalid_request_error", nil, nil)
	}
	c := &call{model: req.Model, stream: req.Stream, idemKey: r.Header.Get(IdempotencyHeader), store: req.Store, metadata: req.Metadata}
	c.includeUsage = req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	var sys []string
	if req.Messages != nil {
		for _, m := range *req.Messages {
			sys = c.addMessage(sys, m.Role, contentText(m.Content))
		}
	}
	c.system = strings.Join(sys, "\n")
	c.wantsJSON = wantsJSON(c.system) || (req.ResponseFormat != nil && req.ResponseFormat.Type != "" && req.ResponseFormat.Type != "text")
	if rf := req.ResponseFormat; rf != nil && rf.Type == "json_schema" && rf.JSONSchema != nil && len(rf.JSONSchema.Schema) > 0 {
		c.schema = rf.JSONSchema.Schema
	}
	c.record = recordOf(r.Header.Get(RecordHeader), c.system, c.messages)
	c.inputTokens = estimateTokens(c.system, c.messages)
	switch {
	case req.MaxCompletionTokens != nil:
		c.maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		c.maxTokens = *req.MaxTokens
	}
	e.call = c
	switch {
	case req.Model == "":
		return c, v.errReply(e, http.StatusBadRequest, "you must provide a model parameter", "invalid_request_error", nil, nil)
	case req.Messages == nil:
		return c, v.errReply(e, http.StatusBadRequest, "Missing required parameter: 'messages'.", "invalid_request_error", strp("messages"), strp("missing_required_parameter"))
	case (req.MaxTokens != nil || req.MaxCompletionTokens != nil) && c.maxTokens < 1:
		return c, v.fail(ActionInvalidParam, Step{}, e)
	}
	return c, nil
}

// defaultRPM is what a scripted rate limit reports when the scenario has none.
const defaultRPM = 500

func (v openAI) fail(a Action, st Step, e *errInfo) *reply {
	model := e.model("gpt-4o-mini")
	var r *reply
	switch a {
	case ActionRateLimit:
		hit := e.hit
		if hit == nil {
			hit = &limitHit{kind: "requests", limit: defaultRPM, used: defaultRPM, requested: 1}
			if e.rate != nil && e.rate.rpm > 0 {
				hit.limit, hit.used = e.rate.rpm, e.rate.rpm
			}
		}
		wait := e.retryAfter
		unit, typ := "requests per min (RPM)", "requests"
		if hit.kind == "tokens" {
			unit, typ = "tokens per min (TPM)", "tokens"
		}
		msg := fmt.Sprintf("Rate limit reached for %s in organization %s on %s: Limit %d, Used %d, Requested %d. Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.",
			model, e.orgID, unit, hit.limit, hit.used, hit.requested, wait.Round(time.Millisecond))
		r = v.errReply(e, http.StatusTooManyRequests, msg, typ, nil, strp("rate_limit_exceeded"))
		retryHeaders(r.header, wait)
	case ActionTooLarge:
		limit, requested := 30000, 30001
		if e.hit != nil {
			limit, requested = e.hit.limit, e.hit.requested
		}
		msg := fmt.Sprintf("Request too large for %s in organization %s on tokens per min (TPM): Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.",
			model, e.orgID, limit, requested)
		r = v.errReply(e, http.StatusTooManyRequests, msg, "tokens", nil, strp("rate_limit_exceeded"))
	case ActionExhausted:
		r = v.errReply(e, http.StatusTooManyRequests, "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
			"insufficient_quota", nil, strp("insufficient_quota"))
	case ActionOverloaded:
		msg := fmt.Sprintf("That model is currently overloaded with other requests. You can retry your request, or contact us through our help center at help.openai.com if the error persists. (Please include the request ID %s in your message.)",
			strings.TrimPrefix(e.reqID, "req_"))
		r = v.errReply(e, http.StatusServiceUnavailable, msg, "server_error", nil, nil)
		retryHeaders(r.header, e.retryAfter)
	case ActionServerError:
		r = v.errReply(e, http.StatusInternalServerError, "The server had an error while processing your request. Sorry about that!", "server_error", nil, nil)
		retryHeaders(r.header, e.retryAfter)
	case ActionUnauthorized:
		r = v.errReply(e, http.StatusUnauthorized, fmt.Sprintf("Incorrect API key provided: %s. You can find your API key at https://platform.openai.com/account/api-keys.", maskKey(e.key)),
			"invalid_request_error", nil, strp("invalid_api_key"))
	case ActionContextLength:
		limit := e.ctxLimit
		if limit == 0 {
			limit = 128000
		}
		got := limit + 1
		if e.call != nil && e.call.inputTokens > limit {
			got = e.call.inputTokens
		}
		msg := fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", limit, got)
		r = v.errReply(e, http.StatusBadRequest, msg, "invalid_request_error", strp("messages"), strp("context_length_exceeded"))
	case ActionInvalidParam:
		got := -1
		if e.call != nil && e.call.maxTokens < 1 && e.call.maxTokens != 0 {
			got = e.call.maxTokens
		}
		msg := fmt.Sprintf("Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got %d instead.", got)
		r = v.errReply(e, http.StatusBadRequest, msg, "invalid_request_error", strp("max_tokens"), strp("integer_below_min_value"))
	case ActionPolicy:
		r = v.errReply(e, http.StatusBadRequest, "Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a different prompt: https://platform.openai.com/docs/guides/reasoning#advice-on-prompting",
			"invalid_request_error", nil, strp("invalid_prompt"))
	default:
		panic("fakeprovider: openai has no error for action " + string(a))
	}
	if st.Status != 0 {
		r.status = st.Status
	}
	return r
}

// maskKey shows what the API shows of a wrong key: the first eight and the
// last four characters.
func maskKey(k string) string {
	if len(k) <= 12 {
		return k
	}
	return k[:8] + strings.Repeat("*", len(k)-12) + k[len(k)-4:]
}

func (v openAI) notFound(r *http.Request, e *errInfo) *reply {
	if r.URL.Path == "/v1/chat/completions" {
		return v.errReply(e, http.StatusMethodNotAllowed, fmt.Sprintf("Invalid method for URL (%s %s)", r.Method, r.URL.Path), "invalid_request_error", nil, nil)
	}
	return v.errReply(e, http.StatusNotFound, fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), "invalid_request_error", nil, nil)
}

func (openAI) headers(h http.Header, e *errInfo) {
	h.Set("x-request-id", e.reqID)
	h.Set("openai-version", "2020-10-01")
	h.Set("openai-processing-ms", strconv.FormatInt(max(1, e.latency.Milliseconds()), 10))
	if rt := e.rate; rt != nil && !rt.hidden {
		if rt.rpm > 0 {
			h.Set("x-ratelimit-limit-requests", strconv.Itoa(rt.rpm))
			h.Set("x-ratelimit-remaining-requests", strconv.Itoa(rt.reqLeft))
			h.Set("x-ratelimit-reset-requests", rt.reqReset.String())
		}
		if rt.tpm > 0 {
			h.Set("x-ratelimit-limit-tokens", strconv.Itoa(rt.tpm))
			h.Set("x-ratelimit-remaining-tokens", strconv.Itoa(rt.tokLeft))
			h.Set("x-ratelimit-reset-tokens", rt.tokReset.String())
		}
	}
}

type openAIUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
		AudioTokens  int `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens          int `json:"reasoning_tokens"`
		AudioTokens              int `json:"audio_tokens"`
		AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
		RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
	} `json:"completion_tokens_details"`
}

func openAIUsageOf(a *answer) *openAIUsage {
	return &openAIUsage{PromptTokens: a.inputTokens, CompletionTokens: a.outputTokens, TotalTokens: a.inputTokens + a.outputTokens}
}

type openAIMessage struct {
	Role        string  `json:"role"`
	Content     string  `json:"content"`
	Refusal     *string `json:"refusal"`
	Annotations []any   `json:"annotations"`
}

type openAIChoice struct {
	Index        int           `json:"index"`
	Message      openAIMessage `json:"message"`
	Logprobs     *struct{}     `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

const openAIFingerprint = "fp_34a54ae93c"

func (openAI) body(c *call, a *answer) []byte {
	return marshal(struct {
		ID                string         `json:"id"`
		Object            string         `json:"object"`
		Created           int64          `json:"created"`
		Model             string         `json:"model"`
		Choices           []openAIChoice `json:"choices"`
		Usage             *openAIUsage   `json:"usage"`
		ServiceTier       string         `json:"service_tier"`
		SystemFingerprint string         `json:"system_fingerprint"`
	}{
		ID: a.id, Object: "chat.completion", Created: a.created, Model: a.model,
		Choices: []openAIChoice{{Message: openAIMessage{Role: "assistant", Content: a.text, Annotations: []any{}}, FinishReason: chatFinishReason(a)}},
		Usage:   openAIUsageOf(a), ServiceTier: "default", SystemFingerprint: openAIFingerprint,
	}, "  ")
}

type openAIDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// Refusal is "null" on the first chunk only, as the API sends it.
	Refusal json.RawMessage `json:"refusal,omitempty"`
}

type openAIChunkChoice struct {
	Index        int         `json:"index"`
	Delta        openAIDelta `json:"delta"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason *string     `json:"finish_reason"`
}

type openAIChunk struct {
	ID                string              `json:"id"`
	Object            string              `json:"object"`
	Created           int64               `json:"created"`
	Model             string              `json:"model"`
	ServiceTier       string              `json:"service_tier"`
	SystemFingerprint string              `json:"system_fingerprint"`
	Choices           []openAIChunkChoice `json:"choices"`
	// Usage is "null" on every chunk but the last when include_usage is set, and
	// absent otherwise, as the API does.
	Usage json.RawMessage `json:"usage,omitempty"`
}

func sseData(v any) []byte {
	return append(append([]byte("data: "), marshal(v, "")...), '\n', '\n')
}

func (openAI) stream(c *call, a *answer) (head, deltas, tail [][]byte) {
	chunk := func(ch []openAIChunkChoice) openAIChunk {
		k := openAIChunk{ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model,
			ServiceTier: "default", SystemFingerprint: openAIFingerprint, Choices: ch}
		if c.includeUsage {
			k.Usage = json.RawMessage("null")
		}
		return k
	}
	empty := ""
	head = [][]byte{sseData(chunk([]openAIChunkChoice{{Delta: openAIDelta{Role: "assistant", Content: &empty, Refusal: json.RawMessage("null")}}}))}
	for _, p := range chunks(a.text) {
		p := p
		deltas = append(deltas, sseData(chunk([]openAIChunkChoice{{Delta: openAIDelta{Content: &p}}})))
	}
	stop := chatFinishReason(a)
	tail = [][]byte{sseData(chunk([]openAIChunkChoice{{Delta: openAIDelta{}, FinishReason: &stop}}))}
	if c.includeUsage {
		k := chunk([]openAIChunkChoice{})
		k.Usage = marshal(openAIUsageOf(a), "")
		tail = append(tail, sseData(k))
	}
	tail = append(tail, []byte("data: [DONE]\n\n"))
	return head, deltas, tail
}

// streamError is the data event the API sends when a stream fails after its
// 200; there is no event name and no [DONE] after it.
func (openAI) streamError(e *errInfo) []byte {
	return sseData(struct {
		Error openAIError `json:"error"`
	}{openAIError{Message: "The server had an error while processing your request. Sorry about that!", Type: "server_error"}})
}
