package fakeprovider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// RecordHeader names the record a request is for. Without it the record is the
// hash of the messages, which is what a retry of the same request repeats.
const RecordHeader = "X-Triage-Record"

// IdempotencyHeader carries the key whose billed answer a retry gets back.
const IdempotencyHeader = "Idempotency-Key"

// call is one API request reduced to what the fake decides and answers on; the
// two wire formats parse into it.
type call struct {
	model        string
	stream       bool
	includeUsage bool
	maxTokens    int
	system       string
	messages     []string // text of every message, system excluded
	lastUser     string
	wantsJSON    bool
	// schema is the JSON Schema the request asked the answer to follow
	// (schema.go); tool, for Anthropic, the forced tool that carries it.
	schema json.RawMessage
	tool   string
	// offSchema: the off_schema action answers this call.
	offSchema bool
	// incomplete: the incomplete action answers this call, for this reason.
	incomplete  string
	record      string
	idemKey     string
	inputTokens int
	// store and metadata: an OpenAI store: true call (stored.go).
	store    bool
	metadata map[string]string
	// background and textFormat: an OpenAI Responses-API call
	// (responses.go).
	background bool
	textFormat string
}

// text is everything a marker may hide in.
func (c *call) text() string {
	return c.system + "\n" + strings.Join(c.messages, "\n")
}

// estimateTokens is the usual four-characters-a-token rule plus a per-message
// overhead: deterministic, and close enough that a long input trips the limit.
func estimateTokens(system string, messages []string) int {
	n := 3
	if system != "" {
		n += 4 + ceilDiv(len(system), 4)
	}
	for _, m := range messages {
		n += 4 + ceilDiv(len(m), 4)
	}
	return n
}

func outputTokens(text string) int { return max(1, ceilDiv(len(text), 4)) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// contentText flattens the two content shapes both vendors accept: a string, or
// an array of typed parts of which only the text parts matter here.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" && p.Type != "input_text" {
			continue
		}
		if i > 0 && b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// recordOf prefers the header; the fallback hashes exactly what a retry resends.
func recordOf(header, system string, messages []string) string {
	if header != "" {
		return header
	}
	h := sha256.New()
	h.Write([]byte(system))
	for _, m := range messages {
		h.Write([]byte{0})
		h.Write([]byte(m))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

func wantsJSON(system string) bool {
	return strings.Contains(strings.ToLower(system), "json")
}

// answerFor is the text of a billed answer to c: in c's schema (or out of
// it for off_schema) when c carries one, else answerText.
func answerFor(c *call) string {
	switch {
	case c.schema != nil && c.offSchema:
		return offSchemaAnswer(c.schema, c.lastUser)
	case c.schema != nil:
		return schemaAnswer(c.schema, c.lastUser)
	case c.offSchema:
		return `{"off_schema":true}`
	}
	return answerText(c.lastUser, c.wantsJSON)
}

// addMessage takes one message of an OpenAI request (Chat Completions'
// messages, the Responses API's input items): a system or developer
// message joins sys, any other is a message of the conversation, and the
// last user message is the one the answer is made from.
func (c *call) addMessage(sys []string, role, text string) []string {
	switch role {
	case "system", "developer":
		return append(sys, text)
	}
	c.messages = append(c.messages, text)
	if role == "user" {
		c.lastUser = text
	}
	return sys
}
