package redact

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	// Marker replaces every secret.
	Marker = "[REDACTED]"
	// FieldMaxBytes bounds a short value: a vendor code or type, a reason, a
	// header value, an error from the network.
	FieldMaxBytes = 160
	// ExcerptMaxBytes bounds an error excerpt (a dead letter's body excerpt).
	ExcerptMaxBytes = 500
	// cutMargin is the longest secret a cut is guaranteed not to split into a
	// recognisable-but-unmatched prefix (real keys are well under 200 bytes).
	cutMargin = 512
)

// rules run in order; each replaces a secret with Marker, keeping the name
// it was given under so an excerpt still reads. A value that already is the
// Marker is matched and replaced by itself, so redacting twice is harmless.
var rules = []struct {
	re   *regexp.Regexp
	repl string
}{
	// Authorization header or field, with or without a scheme.
	{regexp.MustCompile(`(?i)(authorization["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token)\s+)?(?:\[REDACTED\]|[^\s"',;}]+)`), "${1}" + Marker},
	// A bare scheme and credential anywhere.
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}`), "${1} " + Marker},
	// Named key fields and headers: x-api-key: v, "api_key": "v", api-key=v, x-goog-api-key.
	{regexp.MustCompile(`(?i)((?:x-goog-api-key|x-api-key|api[-_]?key|access[-_]?token|secret[-_]?key|client[-_]?secret|password)["']?\s*[:=]\s*["']?)(?:\[REDACTED\]|[^\s"'&,;}]+)`), "${1}" + Marker},
	// Keys in URL query strings (Gemini's ?key=).
	{regexp.MustCompile(`([?&](?:key|token|sig)=)[^&\s"']+`), "${1}" + Marker},
	// Key-shaped tokens: OpenAI/Anthropic/DeepSeek sk-…, Stripe-like sk_live_…,
	// Groq gsk_…, xAI xai-…, Hugging Face hf_…, Google AIza…, AWS AKIA….
	{regexp.MustCompile(`\b(?:sk|rk|pk)-[A-Za-z0-9_\-*.]{6,}`), Marker},
	{regexp.MustCompile(`\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{6,}`), Marker},
	{regexp.MustCompile(`\b(?:gsk|xai|hf|nvapi|r8)[_-][A-Za-z0-9_\-]{16,}`), Marker},
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{20,}`), Marker},
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), Marker},
}

// triggers are lower-case substrings at least one of which every rule's
// match contains: text with none of them is left to the exact match alone,
// which keeps the common answer (and every header) off the regexps.
var triggers = []string{
	"authorization", "bearer", "basic", "apikey", "api_key", "api-key", "key=", "token=",
	"access_token", "access-token", "accesstoken", "secret", "password", "sig=",
	"sk-", "rk-", "pk-", "sk_", "rk_", "pk_", "gsk", "xai", "hf_", "hf-", "nvapi", "r8_", "r8-", "aiza", "akia", "asia",
}

// triggersByFirst indexes triggers by their first byte, for the ASCII
// scan of mayHoldSecret.
var triggersByFirst = func() (idx [128][]string) {
	for _, t := range triggers {
		idx[t[0]] = append(idx[t[0]], t)
	}
	return idx
}()

// mayHoldSecret reports whether s, lower-cased, contains a trigger. ASCII
// text (every answer and header the worker sees on its common path) is
// scanned once in place, with no lower-cased copy; text with any other
// byte is lower-cased as Unicode first (a KELVIN SIGN lower-cases to k,
// and the rules' (?i) fold it the same way), as it always was.
func mayHoldSecret(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return mayHoldSecretFolded(s)
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		for _, t := range triggersByFirst[c] {
			if hasLowerPrefixASCII(s[i:], t) {
				return true
			}
		}
	}
	return false
}

// hasLowerPrefixASCII: s starts with t once its ASCII letters are
// lower-cased (t is lower-case ASCII).
func hasLowerPrefixASCII(s, t string) bool {
	if len(s) < len(t) {
		return false
	}
	for j := 0; j < len(t); j++ {
		c := s[j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != t[j] {
			return false
		}
	}
	return true
}

func mayHoldSecretFolded(s string) bool {
	lower := strings.ToLower(s)
	for _, t := range triggers {
		if strings.Contains(lower, t) {
			return true
		}
	}
	return false
}

// Boundary redacts the secrets of one key. The zero Boundary knows no exact
// secret and still removes key-shaped tokens. Safe for concurrent use.
type Boundary struct {
	exact  []string // the secrets and their escaped spellings, longest first
	margin int
}

// New returns a Boundary that also removes each of secrets exactly (empty
// strings are ignored).
func New(secrets ...string) Boundary {
	b := Boundary{margin: cutMargin}
	seen := map[string]bool{}
	add := func(s string) {
		if len(s) >= 4 && !seen[s] {
			seen[s] = true
			b.exact = append(b.exact, s)
		}
	}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		add(s)
		q := strconv.Quote(s)
		add(q[1 : len(q)-1])                  // as inside a JSON or Go string
		add(strings.ReplaceAll(s, "/", `\/`)) // JSON's optional escaped solidus
		add(url.QueryEscape(s))
		add(url.PathEscape(s))
		b.margin = max(b.margin, 2*len(s)+1)
	}
	// Longest first, so a secret that contains another is removed whole.
	for i := 1; i < len(b.exact); i++ {
		for j := i; j > 0 && len(b.exact[j]) > len(b.exact[j-1]); j-- {
			b.exact[j], b.exact[j-1] = b.exact[j-1], b.exact[j]
		}
	}
	return b
}

// Secrets removes the exact secrets and every key-shaped token from s and
// changes nothing else (no escaping, no bound): for a body that must stay
// parseable, such as the one the classifier reads.
func (b Boundary) Secrets(s string) string {
	s = b.Exact(s)
	if !mayHoldSecret(s) {
		return s
	}
	for _, r := range rules {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	return s
}

// Exact removes only the secrets it was built with, and a cut-off start of
// one at the very end of s (its first prefixBytes bytes or more, as a value
// bounded by someone else would leave it): cheap enough for a whole 2xx body.
func (b Boundary) Exact(s string) string {
	for _, x := range b.exact {
		p := x
		if len(p) > prefixBytes {
			p = p[:prefixBytes]
		}
		if !strings.Contains(s, p) {
			continue
		}
		var sb strings.Builder
		for {
			i := strings.Index(s, p)
			if i < 0 {
				break
			}
			n := len(p)
			for n < len(x) && i+n < len(s) && s[i+n] == x[n] {
				n++
			}
			if n < len(x) && i+n < len(s) {
				// Not the secret, only text that starts like it.
				sb.WriteString(s[:i+1])
				s = s[i+1:]
				continue
			}
			sb.WriteString(s[:i])
			sb.WriteString(Marker)
			s = s[i+n:]
		}
		sb.WriteString(s)
		s = sb.String()
	}
	return s
}

// prefixBytes is how much of a secret's start is enough to recognise it.
const prefixBytes = 10

// Field is a short value safe for any output: secrets removed, every control
// character escaped (new lines included), at most FieldMaxBytes.
func (b Boundary) Field(s string) string { return b.bound(s, FieldMaxBytes, false) }

// Excerpt is an error excerpt safe for any output: secrets removed, control
// characters escaped except new line and tab, at most ExcerptMaxBytes.
func (b Boundary) Excerpt(s string) string { return b.bound(s, ExcerptMaxBytes, true) }

// Headers returns a copy of h with every name and value passed through
// Field. nil stays nil.
func (b Boundary) Headers(h map[string]string) map[string]string {
	if h == nil {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[b.Field(k)] = b.Field(v)
	}
	return out
}

// bound redacts, escapes and cuts s to limit bytes. Only a window of s is
// redacted (a 64 KiB body costs no more than a short one), and the window
// is widened until the cut falls at least margin bytes before its end: a
// secret the window's edge split in two always sits in that tail, so it is
// cut away with it.
func (b Boundary) bound(s string, limit int, keepLines bool) string {
	margin := b.margin
	if margin == 0 {
		margin = cutMargin
	}
	for window := 2*limit + margin; ; window *= 2 {
		if window >= len(s) {
			return cut(Escape(b.Secrets(s), keepLines), limit)
		}
		w := s[:window]
		for len(w) > 0 && !utf8.RuneStart(s[len(w)]) {
			w = w[:len(w)-1]
		}
		out := Escape(b.Secrets(w), keepLines)
		if len(out) >= limit+margin {
			return cut(out, limit)
		}
	}
}

// cut bounds s to limit bytes on a rune boundary, marking a cut with "…".
func cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	c := limit
	for c > 0 && !utf8.RuneStart(s[c]) {
		c--
	}
	return s[:c] + "…"
}

// Escape writes control characters (C0, DEL, C1, the Unicode line and
// paragraph separators and bidirectional overrides) and invalid UTF-8 as
// visible escapes (\n, \x1b, \u202e); with keepLines, new line and tab stay.
// Everything else, backslashes included, is unchanged.
func Escape(s string, keepLines bool) string {
	if !needsEscape(s, keepLines) {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			sb.WriteString(`\x`)
			sb.WriteString(strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case keepLines && (r == '\n' || r == '\t'):
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			sb.WriteString(`\x`)
			sb.WriteString(strconv.FormatUint(uint64(r)|0x100, 16)[1:])
		case isUnsafe(r):
			q := strconv.QuoteRuneToASCII(r)
			sb.WriteString(q[1 : len(q)-1])
		default:
			sb.WriteString(s[i : i+size])
		}
		i += size
	}
	return sb.String()
}

func needsEscape(s string, keepLines bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 || c == 0x7f) && !(keepLines && (c == '\n' || c == '\t')) {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || isUnsafe(r) {
			return true
		}
		i += size
	}
	return false
}

// isUnsafe: C1 controls, line/paragraph separators, bidi embeddings,
// overrides and isolates, and the BOM/zero-width no-break space.
func isUnsafe(r rune) bool {
	return (r >= 0x80 && r <= 0x9f) || r == 0x2028 || r == 0x2029 ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0xfeff
}

// HasControl reports whether s holds a control character (C0, DEL or C1)
// or NUL: such a name is refused where it enters (record ids, batch names).
func HasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return true
		}
	}
	return false
}
