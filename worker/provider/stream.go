package provider

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"

	"github.com/triage-dev/triage/classify"
)

// maxSSELine bounds one server-sent-event line.
const maxSSELine = 4 << 20

// streamState assembles a streamed answer.
type streamState struct {
	raw     bytes.Buffer // the stream text received, up to MaxBodyBytes
	content strings.Builder
	done    bool // [DONE] or message_stop seen
	failed  bool // an error event, an error finish, or an undecodable event
	// final, in the Responses format, is the completed response object,
	// kept as the body instead of the stream text.
	final string
}

// readStream reads a 2xx event stream. A stream that ends (EOF, reset,
// timeout) before its terminator, or carries an error event, is PhaseStream
// with the received text as Body; a complete one is PhaseResponse with the
// text as Body and the assembled Content.
func (c *Client) readStream(body io.Reader, res *Result) {
	var st streamState
	br := bufio.NewReaderSize(body, 64<<10)
	var event string
	var data []string
	for !st.done && !st.failed {
		line, err := readLine(br, &st)
		if err != nil {
			break
		}
		switch {
		case line == "":
			if len(data) > 0 {
				c.streamEvent(event, strings.Join(data, "\n"), &st, res)
			}
			event, data = "", nil
		case strings.HasPrefix(line, ":"):
			// comment / keep-alive
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			d := strings.TrimPrefix(line, "data:")
			data = append(data, strings.TrimPrefix(d, " "))
		}
	}
	if !st.done && !st.failed && len(data) > 0 {
		// A final event without its blank line: [DONE] at EOF still counts.
		c.streamEvent(event, strings.Join(data, "\n"), &st, res)
	}
	res.Observation.Body = st.raw.String()
	if st.final != "" && st.done && !st.failed {
		res.Observation.Body = capBody([]byte(st.final))
	}
	res.Content = st.content.String()
	if !st.done || st.failed {
		res.Observation.Phase = classify.PhaseStream
	}
}

// readLine reads one line (without its line ending), copying the raw bytes
// into st.raw up to MaxBodyBytes.
func readLine(br *bufio.Reader, st *streamState) (string, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if room := MaxBodyBytes - st.raw.Len(); room > 0 {
			st.raw.Write(frag[:min(len(frag), room)])
		}
		if len(line)+len(frag) <= maxSSELine {
			line = append(line, frag...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				return strings.TrimRight(string(line), "\r\n"), nil
			}
			return "", err
		}
		return strings.TrimRight(string(line), "\r\n"), nil
	}
}

func (c *Client) streamEvent(event, data string, st *streamState, res *Result) {
	switch c.format {
	case FormatAnthropic:
		anthropicEvent(event, data, st, res)
		return
	case FormatResponses:
		responsesStreamEvent(event, data, st, res)
		return
	}
	if strings.TrimSpace(data) == "[DONE]" {
		st.done = true
		return
	}
	var ch openaiResponse
	if err := json.Unmarshal([]byte(data), &ch); err != nil {
		st.failed = true
		return
	}
	if len(ch.Error) > 0 && string(ch.Error) != "null" {
		st.failed = true
	}
	if ch.Usage != nil {
		res.InputTokens, res.OutputTokens = ch.Usage.PromptTokens, ch.Usage.CompletionTokens
	}
	if len(ch.Choices) > 0 {
		if d := ch.Choices[0].Delta; d != nil && d.Content != nil {
			st.content.WriteString(*d.Content)
		}
		if fr := ch.Choices[0].FinishReason; fr != nil && *fr != "" {
			res.FinishReason = *fr
			if *fr == "error" { // OpenRouter: the upstream failed mid-stream
				st.failed = true
			}
		}
	}
}

type anthropicEventData struct {
	Type    string `json:"type"`
	Message *struct {
		Usage *anthropicUsage `json:"usage"`
	} `json:"message"`
	Delta *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
}

func anthropicEvent(event, data string, st *streamState, res *Result) {
	var ev anthropicEventData
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		st.failed = true
		return
	}
	if event == "" {
		event = ev.Type
	}
	switch event {
	case "message_start":
		if ev.Message != nil && ev.Message.Usage != nil {
			res.InputTokens = ev.Message.Usage.InputTokens
			res.OutputTokens = ev.Message.Usage.OutputTokens
		}
	case "content_block_delta":
		if ev.Delta != nil && ev.Delta.Type == "text_delta" {
			st.content.WriteString(ev.Delta.Text)
		}
		// The forced tool's input (Request.Schema) arrives in pieces of
		// JSON text; triage asks for no text besides it.
		if ev.Delta != nil && ev.Delta.Type == "input_json_delta" {
			st.content.WriteString(ev.Delta.PartialJSON)
		}
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != nil {
			res.FinishReason = *ev.Delta.StopReason
		}
		if ev.Usage != nil {
			if ev.Usage.InputTokens > 0 {
				res.InputTokens = ev.Usage.InputTokens
			}
			res.OutputTokens = ev.Usage.OutputTokens
		}
	case "message_stop":
		st.done = true
	case "error":
		st.failed = true
	}
}
