package classify

import (
	"regexp"
	"strconv"
)

// Overflow is what a context-length rejection (reason "context_length") says
// about the sizes involved, in the vendor's own tokens; 0 where the message
// does not say.
type Overflow struct {
	// Limit is the model's context window.
	Limit int
	// Input is what the request's input (system and messages) came to.
	Input int
	// Output is the completion the request reserved (max_tokens), where the
	// message names it apart from the input.
	Output int
}

// Known reports whether the message gave the input's size: without it the
// caller has to estimate.
func (o Overflow) Known() bool { return o.Input > 0 }

// The vendors' words, matched on the raw body (digits and these phrases
// survive JSON escaping unchanged). Whitespace is loose: Anthropic's message
// has been seen wrapped ("184915 +\n20000").
var (
	// OpenAI: "This model's maximum context length is 4097 tokens. However,
	// your messages resulted in 4294 tokens." and the older "…, however you
	// requested 8238 tokens (8238 in your prompt; 0 for the completion)";
	// vLLM and DeepSeek: "However, you requested 10515 tokens (2323 in the
	// messages, 8192 in the completion)"; OpenRouter "you requested about N
	// tokens".
	openaiOverflow = regexp.MustCompile(`(?i)maximum context length is (\d+) tokens[.,]?\s*however,?\s*` +
		`(?:your messages resulted in|you requested(?: about)?)\s+(\d+) tokens` +
		`(?:\s*\((\d+) in (?:the messages|your prompt)[;,]\s*(\d+) (?:in|for) the completion\))?`)
	// Anthropic: "prompt is too long: 208310 tokens > 200000 maximum".
	anthropicPrompt = regexp.MustCompile(`prompt is too long:\s*(\d+) tokens\s*>\s*(\d+) maximum`)
	// Anthropic: "input length and `max_tokens` exceed context limit: 199759
	// + 8192 > 200000".
	anthropicLimit = regexp.MustCompile(`exceed context limit:\s*(\d+)\s*\+\s*(\d+)\s*>\s*(\d+)`)
	// Gemini: "The input token count (1234567) exceeds the maximum number of
	// tokens allowed (1048576)."
	geminiOverflow = regexp.MustCompile(`(?i)input token count \(?(\d+)\)? exceeds the maximum number of tokens allowed \(?(\d+)\)?`)
)

// ContextOverflow reads the token counts from a context-length rejection's
// body. Some forms carry none (Anthropic's 413 "Request size exceeds model
// context window", Bedrock's "Input is too long for requested model"): then
// ok is false and the caller estimates.
func ContextOverflow(o Observation) (ov Overflow, ok bool) {
	body := o.Body
	if m := openaiOverflow.FindStringSubmatch(body); m != nil {
		ov = Overflow{Limit: atoi(m[1]), Input: atoi(m[2])}
		if m[3] != "" {
			ov.Input, ov.Output = atoi(m[3]), atoi(m[4])
		}
		return ov, true
	}
	if m := anthropicLimit.FindStringSubmatch(body); m != nil {
		return Overflow{Input: atoi(m[1]), Output: atoi(m[2]), Limit: atoi(m[3])}, true
	}
	if m := anthropicPrompt.FindStringSubmatch(body); m != nil {
		return Overflow{Input: atoi(m[1]), Limit: atoi(m[2])}, true
	}
	if m := geminiOverflow.FindStringSubmatch(body); m != nil {
		return Overflow{Input: atoi(m[1]), Limit: atoi(m[2])}, true
	}
	return Overflow{}, false
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
