package provider

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/triage-dev/triage/classify"
)

// OpenAI chat completions, request side.
type openaiRequest struct {
	Model          string                `json:"model"`
	Messages       []openaiMessage       `json:"messages"`
	MaxTokens      int                   `json:"max_tokens"`
	Temperature    *float64              `json:"temperature,omitempty"`
	ResponseFormat *openaiResponseFormat `json:"response_format,omitempty"`
	Stream         bool                  `json:"stream,omitempty"`
	StreamOptions  *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
	// Store and Metadata: a stored completion (Request.Store).
	Store    bool              `json:"store,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// openaiResponseFormat is json_object, or json_schema with its schema.
type openaiResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict bool            `json:"strict"`
	} `json:"json_schema,omitempty"`
}

type openaiMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// openaiResponse is a chat completion, or one streamed chunk of one.
type openaiResponse struct {
	Choices []struct {
		Message *struct {
			Content *string `json:"content"`
			Refusal *string `json:"refusal"`
		} `json:"message"`
		Delta *struct {
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// Anthropic messages, request side.
type anthropicRequest struct {
	Model       string             `json:"model"`
	System      string             `json:"system,omitempty"`
	Messages    []anthropicMessage `json:"messages"`
	MaxTokens   int                `json:"max_tokens"`
	Temperature *float64           `json:"temperature,omitempty"`
	Stream      bool               `json:"stream,omitempty"`
	// Tools and ToolChoice carry Request.Schema: one tool whose
	// input_schema is the schema, forced, so its input is the answer.
	Tools      []anthropicTool      `json:"tools,omitempty"`
	ToolChoice *anthropicToolChoice `json:"tool_choice,omitempty"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anthropicToolChoice struct {
	Type string `json:"type"` // "tool": this tool must be called
	Name string `json:"name"`
}

type anthropicMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

type anthropicResponse struct {
	Type    string `json:"type"`
	Content []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		Input json.RawMessage `json:"input"` // a tool_use block's
	} `json:"content"`
	StopReason *string         `json:"stop_reason"`
	Usage      *anthropicUsage `json:"usage"`
}

// SchemaToolDescription is the description of the tool that carries a
// schema to Anthropic (Request.Schema).
const SchemaToolDescription = "Give the answer as this tool's input, following its input schema."

// RequestBody renders r's JSON body in format f exactly as Client.Do sends
// it, for callers that send the request another way (a Batch API line). It
// returns an error wrapping ErrInvalidRequest when r is invalid, as Do does.
func RequestBody(f Format, r Request) ([]byte, error) {
	if f != FormatOpenAI && f != FormatAnthropic && f != FormatResponses {
		return nil, fmt.Errorf("%w: unknown wire format %q", ErrInvalidRequest, f)
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return encodeBody(f, r), nil
}

// Body is RequestBody in the client's format.
func (c *Client) Body(r Request) ([]byte, error) { return RequestBody(c.format, r) }

// endpointFor is the URL a client of format f at baseURL posts to.
func endpointFor(f Format, baseURL *url.URL) string {
	switch f {
	case FormatAnthropic:
		return baseURL.JoinPath("messages").String()
	case FormatResponses:
		return baseURL.JoinPath("responses").String()
	}
	return baseURL.JoinPath("chat/completions").String()
}

// encodeBody builds the request body of a validated Request.
func encodeBody(f Format, r Request) []byte {
	var v any
	switch f {
	case FormatResponses:
		v = responsesBody(r)
	case FormatAnthropic:
		ar := anthropicRequest{
			Model: r.Model, System: r.System, MaxTokens: r.MaxTokens, Temperature: r.Temperature,
			Messages: []anthropicMessage{{Role: "user", Content: r.Prompt}}, Stream: r.Stream,
		}
		if r.JSON && r.Schema != nil {
			ar.Tools = []anthropicTool{{Name: r.SchemaName, Description: SchemaToolDescription, InputSchema: r.Schema}}
			ar.ToolChoice = &anthropicToolChoice{Type: "tool", Name: r.SchemaName}
		}
		v = ar
	default:
		or := openaiRequest{Model: r.Model, MaxTokens: r.MaxTokens, Temperature: r.Temperature, Stream: r.Stream}
		if r.Store {
			or.Store, or.Metadata = true, map[string]string{MetadataIdempotencyKey: r.IdempotencyKey}
		}
		if r.System != "" {
			or.Messages = append(or.Messages, openaiMessage{Role: "system", Content: r.System})
		}
		or.Messages = append(or.Messages, openaiMessage{Role: "user", Content: r.Prompt})
		switch {
		case r.JSON && r.Schema != nil:
			rf := &openaiResponseFormat{Type: "json_schema"}
			rf.JSONSchema = &struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
				Strict bool            `json:"strict"`
			}{r.SchemaName, r.Schema, r.SchemaStrict}
			or.ResponseFormat = rf
		case r.JSON:
			or.ResponseFormat = &openaiResponseFormat{Type: "json_object"}
		}
		if r.Stream {
			or.StreamOptions = &struct {
				IncludeUsage bool `json:"include_usage"`
			}{true}
		}
		v = or
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Only strings, ints, bools and a finite *float64 (checked by
		// validate) are marshalled.
		panic(fmt.Sprintf("provider: marshal request: %v", err))
	}
	return b
}

// DecodeResponse is what Do returns for a complete, non-streamed HTTP answer:
// status, headers (keys lower-cased, as in Observation.Headers) and the whole
// body. A Batch API line's embedded response goes through it so that it
// becomes the same Result a synchronous call would have. Elapsed and
// NetworkError stay zero.
func DecodeResponse(f Format, vendor string, path classify.Path, status int, headers map[string]string, body []byte) Result {
	if path == "" {
		path = classify.PathDirect
	}
	res := Result{Observation: classify.Observation{Vendor: vendor, Path: path, Phase: classify.PhaseResponse,
		Status: status, Headers: headers}}
	res.RateLimit = ParseRateLimit(vendor, headers, time.Now())
	decodeAnswer(f, body, &res)
	return res
}

// decodeAnswer fills res from a complete body whose status is already in
// res.Observation: an error status keeps the (capped) body as evidence; a 2xx
// is decoded.
func decodeAnswer(f Format, b []byte, res *Result) {
	res.Observation.Body = capBody(b)
	if s := res.Observation.Status; s < 200 || s > 299 {
		return
	}
	if len(b) > maxSuccessBytes {
		res.Malformed = fmt.Sprintf("2xx body longer than %d bytes", maxSuccessBytes)
		return
	}
	decodeBody(f, b, res)
}

// decode fills Content, FinishReason and usage from a complete 2xx body, or
// Malformed when the body is not the vendor's success shape. A 2xx body
// carrying an error (OpenRouter) is left for the classifier: Observation.Body
// has it.
func decodeBody(f Format, b []byte, res *Result) {
	switch f {
	case FormatResponses:
		decodeResponses(b, res)
	case FormatAnthropic:
		var ar anthropicResponse
		if err := json.Unmarshal(b, &ar); err != nil {
			res.Malformed = "2xx body is not JSON"
			return
		}
		if ar.Type != "message" && ar.Content == nil {
			res.Malformed = "2xx body is not an Anthropic message"
			return
		}
		var sb strings.Builder
		for _, blk := range ar.Content {
			if blk.Type == "text" {
				sb.WriteString(blk.Text)
			}
		}
		res.Content = sb.String()
		// triage sends a tool only to carry a schema (Request.Schema), and
		// forces it: its input is the answer, whatever text came with it.
		for _, blk := range ar.Content {
			if blk.Type == "tool_use" && len(blk.Input) > 0 {
				res.Content = string(blk.Input)
				break
			}
		}
		if ar.StopReason != nil {
			res.FinishReason = *ar.StopReason
		}
		if ar.Usage != nil {
			res.InputTokens, res.OutputTokens = ar.Usage.InputTokens, ar.Usage.OutputTokens
		}
	default:
		var or openaiResponse
		if err := json.Unmarshal(b, &or); err != nil {
			res.Malformed = "2xx body is not JSON"
			return
		}
		if or.Usage != nil {
			res.InputTokens, res.OutputTokens = or.Usage.PromptTokens, or.Usage.CompletionTokens
		}
		if len(or.Choices) == 0 || or.Choices[0].Message == nil {
			if len(or.Error) == 0 {
				res.Malformed = "2xx body has no choices[0].message"
			}
			return
		}
		ch := or.Choices[0]
		if ch.Message.Content != nil {
			res.Content = *ch.Message.Content
		}
		if ch.FinishReason != nil {
			res.FinishReason = *ch.FinishReason
		}
	}
}
