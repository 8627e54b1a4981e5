package provider

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAI chat completions, request side.
type openaiRequest struct {
	Model          string          `json:"model"`
	Messages       []openaiMessage `json:"messages"`
	MaxTokens      int             `json:"max_tokens"`
	Temperature    *float64        `json:"temperature,omitempty"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format,omitempty"`
	Stream        bool `json:"stream,omitempty"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
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
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StopReason *string         `json:"stop_reason"`
	Usage      *anthropicUsage `json:"usage"`
}

// encode builds the request body and URL for the client's format.
func (c *Client) encode(r Request) ([]byte, string) {
	var v any
	var url string
	switch c.format {
	case FormatAnthropic:
		url = c.baseURL.JoinPath("messages").String()
		v = anthropicRequest{
			Model: r.Model, System: r.System, MaxTokens: r.MaxTokens, Temperature: r.Temperature,
			Messages: []anthropicMessage{{Role: "user", Content: r.Prompt}}, Stream: r.Stream,
		}
	default:
		url = c.baseURL.JoinPath("chat/completions").String()
		or := openaiRequest{Model: r.Model, MaxTokens: r.MaxTokens, Temperature: r.Temperature, Stream: r.Stream}
		if r.System != "" {
			or.Messages = append(or.Messages, openaiMessage{Role: "system", Content: r.System})
		}
		or.Messages = append(or.Messages, openaiMessage{Role: "user", Content: r.Prompt})
		if r.JSON {
			or.ResponseFormat = &struct {
				Type string `json:"type"`
			}{"json_object"}
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
	return b, url
}

// decode fills Content, FinishReason and usage from a complete 2xx body, or
// Malformed when the body is not the vendor's success shape. A 2xx body
// carrying an error (OpenRouter) is left for the classifier: Observation.Body
// has it.
func (c *Client) decode(b []byte, res *Result) {
	switch c.format {
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
