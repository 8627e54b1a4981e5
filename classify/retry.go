package classify

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// header looks a header up case-insensitively without allocating.
func header(h map[string]string, name string) (string, bool) {
	if v, ok := h[name]; ok {
		return v, true
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// retryHint reads the wait the response asked for, in seconds. Order:
// retry-after-ms (what the Anthropic and OpenAI SDKs read first), retry-after
// as seconds, retry-after as an HTTP date measured against the response's own
// Date header (the classifier has no clock), then Google RetryInfo.retryDelay.
// undated is true when retry-after was an HTTP date but no usable Date header
// came with it, so no wait could be computed.
func retryHint(h map[string]string, retryDelay string) (secs *float64, undated bool) {
	if v, ok := header(h, "retry-after-ms"); ok {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && finite(ms) && ms >= 0 {
			return ptr(ms / 1000), false
		}
	}
	if v, ok := header(h, "retry-after"); ok {
		v = strings.TrimSpace(v)
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if finite(s) && s >= 0 {
				return ptr(s), false
			}
		} else if at, err := parseHTTPTime(v); err == nil {
			d, ok := header(h, "date")
			now, err := parseHTTPTime(strings.TrimSpace(d))
			if !ok || err != nil {
				return nil, true
			}
			return ptr(math.Max(0, at.Sub(now).Seconds())), false
		}
	}
	if retryDelay != "" {
		// protobuf Duration JSON: decimal seconds with an "s" suffix ("26s", "1.5s").
		if s, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(retryDelay), "s"), 64); err == nil && finite(s) && s >= 0 {
			return ptr(s), false
		}
	}
	return nil, false
}

// httpTimeLayouts are the three date formats HTTP/1.1 allows, in the order
// net/http's ParseTime tries them (TimeFormat, RFC 850, ANSI C). The
// classifier reads them itself so that it, and the decisions built on it,
// do not import net/http.
var httpTimeLayouts = [...]string{"Mon, 02 Jan 2006 15:04:05 GMT", time.RFC850, time.ANSIC}

// parseHTTPTime is net/http's ParseTime.
func parseHTTPTime(text string) (t time.Time, err error) {
	for _, layout := range httpTimeLayouts {
		if t, err = time.Parse(layout, text); err == nil {
			return t, nil
		}
	}
	return t, err
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func ptr[T any](v T) *T { return &v }

// waitPhrases introduce a wait in message text, lower-cased: OpenAI and Groq
// "Please try again in 7m12s", Gemini "Please retry in 36.4s", Azure "Please
// retry after 86400 seconds", Groq/OpenRouter "resets after 5s".
var waitPhrases = []string{"try again in ", "retry in ", "retry after ", "try again after ", "resets after ", "reset after ", "resets in "}

// textWait finds a wait stated in a lower-cased message: the first phrase of
// waitPhrases followed by a duration. It is the weakest hint, read only when
// no header or structured field gave one.
func textWait(lmsg string) (float64, bool) {
	for _, p := range waitPhrases {
		rest := lmsg
		for {
			i := strings.Index(rest, p)
			if i < 0 {
				break
			}
			rest = rest[i+len(p):]
			if s, ok := parseWait(rest); ok {
				return s, true
			}
		}
	}
	return 0, false
}

// parseWait reads a duration at the start of s: Go-style compact units that
// may compound ("20s", "7m12s", "1m0.36s", "644ms", "2h"), or one number and
// a unit word ("1.5 seconds", "2 minutes", "3 days").
func parseWait(s string) (float64, bool) {
	total, parts := 0.0, 0
	for {
		j := 0
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
			j++
		}
		if j == 0 {
			break
		}
		n, err := strconv.ParseFloat(s[:j], 64)
		if err != nil || !finite(n) {
			break
		}
		mult, k, word := waitUnit(s[j:])
		if k == 0 {
			break
		}
		total += n * mult
		parts++
		s = s[j+k:]
		if word {
			break
		}
	}
	return total, parts > 0
}

var waitWords = []struct {
	name string
	mult float64
}{
	{"milliseconds", 0.001}, {"millisecond", 0.001}, {"seconds", 1}, {"second", 1}, {"secs", 1}, {"sec", 1},
	{"minutes", 60}, {"minute", 60}, {"mins", 60}, {"min", 60}, {"hours", 3600}, {"hour", 3600}, {"days", 86400}, {"day", 86400},
}

var waitCompact = []struct {
	name string
	mult float64
}{{"ms", 0.001}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}}

// waitUnit reads the unit after a number: a word (after at most one space)
// or a compact unit not followed by a letter. It returns the multiplier to
// seconds, the bytes read (0: no unit) and whether it was a word.
func waitUnit(s string) (mult float64, n int, word bool) {
	t := strings.TrimPrefix(s, " ")
	for _, u := range waitWords {
		if strings.HasPrefix(t, u.name) && (len(t) == len(u.name) || !isLetter(t[len(u.name)])) {
			return u.mult, len(s) - len(t) + len(u.name), true
		}
	}
	if len(t) != len(s) {
		return 0, 0, false
	}
	for _, u := range waitCompact {
		if strings.HasPrefix(s, u.name) && (len(s) == len(u.name) || !isLetter(s[len(u.name)])) {
			return u.mult, len(u.name), false
		}
	}
	return 0, 0, false
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
