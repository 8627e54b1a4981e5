package ledger

import (
	"regexp"
	"unicode/utf8"
)

// ExcerptMaxBytes is the longest string Redact returns, before its "…".
const ExcerptMaxBytes = 500

const redacted = "[REDACTED]"

// redactRules run in order; each replaces a secret with [REDACTED], keeping
// the name it was given under so the excerpt still reads.
var redactRules = []struct {
	re   *regexp.Regexp
	repl string
}{
	// Authorization header or field, with or without a scheme.
	{regexp.MustCompile(`(?i)(authorization["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token)\s+)?[^\s"',;}]+`), "${1}" + redacted},
	// A bare scheme and credential anywhere.
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}`), "${1} " + redacted},
	// Named key fields and headers: x-api-key: v, "api_key": "v", api-key=v, x-goog-api-key.
	{regexp.MustCompile(`(?i)((?:x-goog-api-key|x-api-key|api[-_]?key|access[-_]?token|secret[-_]?key|client[-_]?secret|password)["']?\s*[:=]\s*["']?)[^\s"'&,;}]+`), "${1}" + redacted},
	// Keys in URL query strings (Gemini's ?key=).
	{regexp.MustCompile(`([?&](?:key|token|sig)=)[^&\s"']+`), "${1}" + redacted},
	// Key-shaped tokens: OpenAI/Anthropic/DeepSeek sk-…, Stripe-like sk_live_…,
	// Groq gsk_…, xAI xai-…, Hugging Face hf_…, Google AIza…, AWS AKIA….
	{regexp.MustCompile(`\b(?:sk|rk|pk)-[A-Za-z0-9_\-*.]{6,}`), redacted},
	{regexp.MustCompile(`\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{6,}`), redacted},
	{regexp.MustCompile(`\b(?:gsk|xai|hf|nvapi|r8)[_-][A-Za-z0-9_\-]{16,}`), redacted},
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{20,}`), redacted},
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), redacted},
}

// Redact removes strings that look like credentials from s (sk-… keys,
// Bearer tokens, x-api-key and api_key values, ?key= query parameters and
// other vendors' key shapes) and truncates the result to ExcerptMaxBytes,
// on a UTF-8 boundary, marking a cut with "…". It is for error excerpts kept
// in dead letters; redaction runs before truncation, so a cut can never
// leave a key's prefix that escaped the patterns.
func Redact(s string) string {
	for _, r := range redactRules {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	if len(s) <= ExcerptMaxBytes {
		return s
	}
	cut := ExcerptMaxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
