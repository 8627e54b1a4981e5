package batchapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/triage-dev/triage/worker/provider"
)

// encodeLine appends l as the vendor wants it in a batch: OpenAI's JSONL
// input line, or one entry of Anthropic's "requests". The body is compacted:
// a JSONL line must not contain a newline.
func (c *Client) encodeLine(dst []byte, l Line) ([]byte, error) {
	id, err := json.Marshal(l.CustomID)
	if err != nil {
		return nil, fmt.Errorf("%w: custom_id: %v", ErrInvalidLines, err)
	}
	dst = append(dst, `{"custom_id":`...)
	dst = append(dst, id...)
	if c.format == provider.FormatAnthropic {
		dst = append(dst, `,"params":`...)
	} else {
		dst = append(dst, `,"method":"POST","url":"`+c.openAIEndpoint()+`","body":`...)
	}
	body := bytes.TrimLeft(l.Body, " \t\r\n")
	if len(body) == 0 || body[0] != '{' {
		return nil, fmt.Errorf("%w: line %s: body is not a JSON object", ErrInvalidLines, l.CustomID)
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, body); err != nil {
		return nil, fmt.Errorf("%w: line %s: body is not valid JSON", ErrInvalidLines, l.CustomID)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// encodeLines checks lines and renders them: OpenAI's JSONL file, or
// Anthropic's create request.
func (c *Client) encodeLines(lines []Line) ([]byte, error) {
	lim := c.Limits()
	switch {
	case len(lines) == 0:
		return nil, fmt.Errorf("%w: no lines", ErrInvalidLines)
	case len(lines) > lim.MaxLines:
		return nil, fmt.Errorf("%w: %d lines, at most %d per batch", ErrInvalidLines, len(lines), lim.MaxLines)
	}
	seen := make(map[string]struct{}, len(lines))
	var out []byte
	if c.format == provider.FormatAnthropic {
		out = append(out, `{"requests":[`...)
	}
	for i, l := range lines {
		switch {
		case l.CustomID == "" || len(l.CustomID) > MaxCustomIDLen:
			return nil, fmt.Errorf("%w: line %d: custom_id must have 1 to %d characters", ErrInvalidLines, i+1, MaxCustomIDLen)
		case strings.ContainsFunc(l.CustomID, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			return nil, fmt.Errorf("%w: line %d: custom_id contains control characters", ErrInvalidLines, i+1)
		}
		if _, dup := seen[l.CustomID]; dup {
			return nil, fmt.Errorf("%w: line %d: custom_id %s is used twice", ErrInvalidLines, i+1, l.CustomID)
		}
		seen[l.CustomID] = struct{}{}
		if c.format == provider.FormatAnthropic && i > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = c.encodeLine(out, l); err != nil {
			return nil, err
		}
		if c.format != provider.FormatAnthropic {
			out = append(out, '\n')
		}
		if int64(len(out)) > lim.MaxBytes {
			return nil, fmt.Errorf("%w: the first %d lines already take %d bytes, more than the %d a batch may", ErrInvalidLines, i+1, len(out), lim.MaxBytes)
		}
	}
	if c.format == provider.FormatAnthropic {
		out = append(out, `]}`...)
	}
	return out, nil
}
