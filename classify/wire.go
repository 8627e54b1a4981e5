package classify

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file reads an error body in one validating pass (validJSON, valid.go) and one
// walk that decodes the members the rules need and skips the rest, instead of
// encoding/json's reflection, which validated and re-scanned the same bytes
// once per nested json.RawMessage.
//
// It is kept only because the plain encoding/json reader misses the 5 µs
// target for BenchmarkClassify: measured side by side in one process on the
// benchmark's 1.36 KB Gemini 429, the encoding/json reader alone took 33 µs
// (45 allocs) against 2.3 µs (2 allocs) for this one, and even swapping only
// gjson.Valid for json.Valid costs 4.4 µs against 1.2 µs, which alone would
// take Classify past 5 µs; validJSON (valid.go) now does that pass faster
// than gjson.Valid did. encoding/json appears only in the tests, as the
// oracle. (The signal layer, the worker's job metadata and the CLI's export
// patches use gjson and sjson; none of them is on this path.)
//
// The result is exactly what encoding/json's Unmarshal into the former wire
// structs gave, corner cases included, because bodies are untrusted and a
// verdict must not depend on the parser: invalid JSON (or JSON nested deeper
// than encoding/json's 10000 levels) yields nothing; member names match
// case-insensitively; a repeated member overwrites (a repeated object merges
// into the first, a repeated array reuses its elements, as encoding/json
// does); null leaves a string unchanged and clears a pointer or slice; a
// value of the wrong JSON type is ignored; strings decode with invalid UTF-8
// and lone surrogates replaced by U+FFFD. FuzzParseBodyMatchesEncodingJSON
// checks this against the former implementation (body_ref_test.go).
//
// Decoders take the whole (valid) body s and the index i where their value
// starts, and return the index just past it.

// wireBody is the top level of every envelope the rules know.
type wireBody struct {
	Error     string    // raw JSON: object (most vendors), string (Ollama) or array (Cloudflare)
	err       wireError // Error decoded, when it is an object
	Errors    string    // raw JSON: Cloudflare's errors[]
	Object    string
	Type      string // raw JSON scalar
	Message   string // raw JSON string
	Code      string // raw JSON scalar
	ErrorType string
	Choices   []wireChoice

	BlockReason string          // promptFeedback.blockReason (Gemini, Vertex)
	Candidates  []wireCandidate // candidates[].finishReason (Gemini, Vertex)
	OutputType  string          // Output.__type (AWS JSON protocol error in a 200)
}

type wireChoice struct{ FinishReason string }

type wireCandidate struct{ FinishReason string }

type wireError struct {
	Message     string // raw JSON string
	Type        string // raw JSON scalar
	Code        string // raw JSON scalar
	Status      string // raw JSON scalar
	ErrorType   string
	InnerError  *wireCode // innererror
	InnerError2 *wireCode // inner_error
	Errors      []wireReason
	Metadata    *wireMetadata
	Details     wireDetails // from the last "details" member
}

type wireCode struct{ Code string }

type wireReason struct{ Reason string }

type wireMetadata struct {
	ErrorType    string
	Raw          string // raw JSON
	ProviderName string
	LimitSource  string
}

// wireDetails is what the rules read from error.details: Google's details[]
// (one wireDetail per element) or Anthropic's details{error_code}.
type wireDetails struct {
	reasons     []string // ErrorInfo.reason
	quotaIDs    []string // QuotaFailure.violations[].quotaId
	quotaLimits []string // ErrorInfo.metadata.quota_limit
	limitZero   bool     // ErrorInfo.metadata.quota_limit_value is "0"
	retryDelay  string   // RetryInfo.retryDelay
	errorCode   string   // Anthropic error_code
}

type wireDetail struct {
	Type       string // @type
	Reason     string
	RetryDelay string
	Violations []wireQuotaID
	// ErrorInfo.metadata: quota_limit_value, quota_limit
	QuotaLimitValue string
	QuotaLimit      string
}

type wireQuotaID struct{ QuotaID string }

type wireCloudflareItem struct {
	Code    string // raw JSON scalar
	Message string // raw JSON string
}

func (w *wireBody) decode(s string, i int) int {
	return scanObject(s, i, func(k string, v int) int {
		switch {
		case keyIs(k, "error"):
			end := 0
			if s[v] == '{' {
				w.err = wireError{}
				end = w.err.decode(s, v)
			} else {
				end = valueEnd(s, v)
			}
			w.Error = s[v:end]
			return end
		case keyIs(k, "errors"):
			return setRaw(&w.Errors, s, v)
		case keyIs(k, "object"):
			return setString(&w.Object, s, v)
		case keyIs(k, "type"):
			return setRaw(&w.Type, s, v)
		case keyIs(k, "message"):
			return setRawString(&w.Message, s, v)
		case keyIs(k, "code"):
			return setRaw(&w.Code, s, v)
		case keyIs(k, "error_type"):
			return setString(&w.ErrorType, s, v)
		case keyIs(k, "choices"):
			return decodeSlice(&w.Choices, s, v, func(c *wireChoice, i int) int {
				return scanObject(s, i, func(k string, v int) int {
					if keyIs(k, "finish_reason") {
						return setString(&c.FinishReason, s, v)
					}
					return valueEnd(s, v)
				})
			})
		case keyIs(k, "candidates"):
			return decodeSlice(&w.Candidates, s, v, func(c *wireCandidate, i int) int {
				return scanObject(s, i, func(k string, v int) int {
					if keyIs(k, "finishReason") {
						return setString(&c.FinishReason, s, v)
					}
					return valueEnd(s, v)
				})
			})
		case keyIs(k, "promptFeedback"):
			return decodeField(s, v, "blockReason", &w.BlockReason)
		case keyIs(k, "output"):
			return decodeField(s, v, "__type", &w.OutputType)
		}
		return valueEnd(s, v)
	})
}

// decodeField reads one string member of the object at s[v], as encoding/json
// does for a struct field holding one string field: an object fills it
// (repeated objects merge), anything else leaves it unchanged.
func decodeField(s string, v int, name string, dst *string) int {
	if s[v] != '{' {
		return valueEnd(s, v)
	}
	return scanObject(s, v, func(k string, v int) int {
		if keyIs(k, name) {
			return setString(dst, s, v)
		}
		return valueEnd(s, v)
	})
}

func (e *wireError) decode(s string, i int) int {
	return scanObject(s, i, func(k string, v int) int {
		switch {
		case keyIs(k, "message"):
			return setRawString(&e.Message, s, v)
		case keyIs(k, "type"):
			return setRaw(&e.Type, s, v)
		case keyIs(k, "code"):
			return setRaw(&e.Code, s, v)
		case keyIs(k, "status"):
			return setRaw(&e.Status, s, v)
		case keyIs(k, "details"):
			e.Details = wireDetails{}
			return e.Details.decode(s, v)
		case keyIs(k, "error_type"):
			return setString(&e.ErrorType, s, v)
		case keyIs(k, "innererror"):
			return decodePtr(&e.InnerError, s, v, (*wireCode).decode)
		case keyIs(k, "inner_error"):
			return decodePtr(&e.InnerError2, s, v, (*wireCode).decode)
		case keyIs(k, "errors"):
			return decodeSlice(&e.Errors, s, v, func(r *wireReason, i int) int {
				return scanObject(s, i, func(k string, v int) int {
					if keyIs(k, "reason") {
						return setString(&r.Reason, s, v)
					}
					return valueEnd(s, v)
				})
			})
		case keyIs(k, "metadata"):
			return decodePtr(&e.Metadata, s, v, (*wireMetadata).decode)
		}
		return valueEnd(s, v)
	})
}

func (c *wireCode) decode(s string, i int) int {
	return scanObject(s, i, func(k string, v int) int {
		if keyIs(k, "code") {
			return setString(&c.Code, s, v)
		}
		return valueEnd(s, v)
	})
}

func (m *wireMetadata) decode(s string, i int) int {
	return scanObject(s, i, func(k string, v int) int {
		switch {
		case keyIs(k, "error_type"):
			return setString(&m.ErrorType, s, v)
		case keyIs(k, "raw"):
			return setRaw(&m.Raw, s, v)
		case keyIs(k, "provider_name"):
			return setString(&m.ProviderName, s, v)
		case keyIs(k, "limit_source"):
			return setString(&m.LimitSource, s, v)
		}
		return valueEnd(s, v)
	})
}

func (d *wireDetails) decode(s string, i int) int {
	switch s[i] {
	case '[': // Google details[]: each element decoded on its own
		return scanArray(s, i, func(v int) int {
			var x wireDetail
			end := 0
			if s[v] == '{' {
				end = x.decode(s, v)
			} else {
				end = valueEnd(s, v)
			}
			switch {
			case strings.HasSuffix(x.Type, "google.rpc.ErrorInfo"):
				if x.Reason != "" {
					d.reasons = append(d.reasons, x.Reason)
				}
				if x.QuotaLimit != "" {
					d.quotaLimits = append(d.quotaLimits, x.QuotaLimit)
				}
				d.limitZero = d.limitZero || x.QuotaLimitValue == "0"
			case strings.HasSuffix(x.Type, "google.rpc.QuotaFailure"):
				for _, q := range x.Violations {
					d.quotaIDs = append(d.quotaIDs, q.QuotaID)
				}
			case strings.HasSuffix(x.Type, "google.rpc.RetryInfo"):
				d.retryDelay = x.RetryDelay
			}
			return end
		})
	case '{': // Anthropic details{error_code}
		return scanObject(s, i, func(k string, v int) int {
			if keyIs(k, "error_code") {
				return setString(&d.errorCode, s, v)
			}
			return valueEnd(s, v)
		})
	}
	return valueEnd(s, i)
}

func (d *wireDetail) decode(s string, i int) int {
	return scanObject(s, i, func(k string, v int) int {
		switch {
		case keyIs(k, "@type"):
			return setString(&d.Type, s, v)
		case keyIs(k, "reason"):
			return setString(&d.Reason, s, v)
		case keyIs(k, "retryDelay"):
			return setString(&d.RetryDelay, s, v)
		case keyIs(k, "violations"):
			return decodeSlice(&d.Violations, s, v, func(q *wireQuotaID, i int) int {
				return scanObject(s, i, func(k string, v int) int {
					if keyIs(k, "quotaId") {
						return setString(&q.QuotaID, s, v)
					}
					return valueEnd(s, v)
				})
			})
		case keyIs(k, "metadata"):
			if s[v] != '{' {
				return valueEnd(s, v)
			}
			return scanObject(s, v, func(k string, v int) int {
				switch {
				case keyIs(k, "quota_limit_value"):
					return setString(&d.QuotaLimitValue, s, v)
				case keyIs(k, "quota_limit"):
					return setString(&d.QuotaLimit, s, v)
				}
				return valueEnd(s, v)
			})
		}
		return valueEnd(s, v)
	})
}

func (c *wireCloudflareItem) decode(s string, i int) int {
	return scanObject(s, i, func(k string, v int) int {
		switch {
		case keyIs(k, "code"):
			return setRaw(&c.Code, s, v)
		case keyIs(k, "message"):
			return setRawString(&c.Message, s, v)
		}
		return valueEnd(s, v)
	})
}

// setRaw stores the raw value (last one wins, like json.RawMessage).
func setRaw(dst *string, s string, v int) int {
	end := valueEnd(s, v)
	*dst = s[v:end]
	return end
}

// setString stores a JSON string; null and other kinds leave dst unchanged.
func setString(dst *string, s string, v int) int {
	end := valueEnd(s, v)
	if s[v] == '"' {
		*dst = unquote(s[v:end])
	}
	return end
}

// setRawString is setString that keeps the literal undecoded (quotes
// included), for messages: most verdicts never read the text, so it is
// decoded only on demand (facts.message).
func setRawString(dst *string, s string, v int) int {
	end := valueEnd(s, v)
	if s[v] == '"' {
		*dst = s[v:end]
	}
	return end
}

// decodePtr decodes the value at s[v] into *p, as encoding/json does for a
// pointer field: null clears it, any other value allocates it if needed, and
// only an object fills it.
func decodePtr[T any](p **T, s string, v int, decode func(*T, string, int) int) int {
	if s[v] == 'n' {
		*p = nil
		return v + len("null")
	}
	if *p == nil {
		*p = new(T)
	}
	if s[v] == '{' {
		return decode(*p, s, v)
	}
	return valueEnd(s, v)
}

// decodeSlice decodes the array at s[v] into *p, as encoding/json does for
// a slice field: null clears it, another kind leaves it unchanged, and an
// array reuses the slice's elements (and its spare capacity) before growing
// it, decoding each object element over what is already there.
func decodeSlice[T any](p *[]T, s string, v int, decode func(*T, int) int) int {
	switch s[v] {
	case 'n':
		*p = nil
		return v + len("null")
	case '[':
	default:
		return valueEnd(s, v)
	}
	elems, n := *p, 0
	end := scanArray(s, v, func(e int) int {
		if n < cap(elems) {
			elems = elems[:max(len(elems), n+1)]
		} else {
			var zero T
			elems = append(elems, zero)
		}
		n++
		if s[e] == '{' {
			return decode(&elems[n-1], e)
		}
		return valueEnd(s, e)
	})
	if n == 0 {
		elems = []T{}
	}
	*p = elems[:n]
	return end
}

// scanObject reads the object at s[i], calling member with each key (as
// memberKey gives it, for keyIs) and the index where its value starts;
// member returns the index just past that value. scanObject returns the
// index just past the object.
func scanObject(s string, i int, member func(key string, v int) int) int {
	i = skipSpace(s, i+1)
	for s[i] == '"' {
		ke := stringEnd(s, i)
		v := skipSpace(s, skipSpace(s, ke)+1) // past ':'
		i = skipSpace(s, member(memberKey(s[i:ke]), v))
		if s[i] == ',' {
			i = skipSpace(s, i+1)
		}
	}
	return i + 1
}

// scanArray reads the array at s[i], calling elem with the index where each
// element starts; elem returns the index just past it.
func scanArray(s string, i int, elem func(v int) int) int {
	i = skipSpace(s, i+1)
	for s[i] != ']' {
		i = skipSpace(s, elem(i))
		if s[i] == ',' {
			i = skipSpace(s, i+1)
		}
	}
	return i + 1
}

func skipSpace(s string, i int) int {
	for i < len(s) && jsonSpace[s[i]] {
		i++
	}
	return i
}

// jsonSpace marks JSON's four white-space bytes.
var jsonSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// stringEnd returns the index just past the string that opens at s[i].
func stringEnd(s string, i int) int {
	for i++; ; i++ {
		j := strings.IndexByte(s[i:], '"')
		if j < 0 {
			return len(s)
		}
		i += j
		// The quote ends the string unless an odd run of backslashes escapes it.
		n := 0
		for k := i - 1; s[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return i + 1
		}
	}
}

// valueEnd returns the index just past the value that starts at s[i].
func valueEnd(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '"':
		return stringEnd(s, i)
	case '{', '[':
		depth := 0
		for {
			for i < len(s) && !structural[s[i]] {
				i++
			}
			if i == len(s) {
				return i
			}
			switch s[i] {
			case '"':
				i = stringEnd(s, i)
				continue
			case '{', '[':
				depth++
			default:
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	for i < len(s) && !endsScalar[s[i]] {
		i++
	}
	return i
}

var (
	structural = byteSet(`"{}[]`)
	endsScalar = byteSet(",}] \t\n\r")
)

func byteSet(chars string) (set [256]bool) {
	for _, c := range []byte(chars) {
		set[c] = true
	}
	return set
}

// memberKey is the form of a raw member name (quotes included) that keyIs
// reads: a plain name (no escape, no byte of 0x80 or more) without its
// quotes, any other one raw. A plain name never starts with a quote (a quote
// in it would be escaped), so keyIs tells the two apart by the first byte,
// and the plainness of a key is decided once, not once per name it is
// compared with.
func memberKey(raw string) string {
	if k := raw[1 : len(raw)-1]; plainASCII(k) {
		return k
	}
	return raw
}

// keyIs matches a member name, as memberKey gives it (or raw, quotes
// included), against a field name the way encoding/json does: after
// unescaping, case-insensitively (bytes.EqualFold).
//
// Names are ASCII, so a plain key matches only a name of its own length,
// compared byte by byte with ASCII case folding; only other keys take the
// unquote and EqualFold path.
func keyIs(k, name string) bool {
	if k == "" || k[0] != '"' { // plain, from memberKey
		if len(k) != len(name) {
			return false
		}
		for i := 0; i < len(k); i++ {
			a, b := k[i], name[i]
			if a == b {
				continue
			}
			if 'A' <= a && a <= 'Z' {
				a += 'a' - 'A'
			}
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			if a != b {
				return false
			}
		}
		return true
	}
	raw := k
	k = raw[1 : len(raw)-1]
	switch {
	case len(k) < len(name):
		// A key shorter than the name never matches: every rune of the
		// name is one byte and no rune of the key is less.
		return false
	case len(k) == len(name) || !plainASCII(k):
	default:
		return false
	}
	if strings.IndexByte(k, '\\') >= 0 {
		k = unquote(raw)
	}
	return strings.EqualFold(k, name)
}

// plainASCII reports whether k has no escape and no byte of 0x80 or more.
func plainASCII(k string) bool {
	for i := 0; i < len(k); i++ {
		if k[i] >= utf8.RuneSelf || k[i] == '\\' {
			return false
		}
	}
	return true
}

// unquote decodes the JSON string literal raw (quotes included) exactly as
// encoding/json does, replacing invalid UTF-8 and unpaired surrogates with
// U+FFFD. Without escapes or bad bytes it returns a substring, no copy.
func unquote(raw string) string {
	s := raw[1 : len(raw)-1]
	if strings.IndexByte(s, '\\') < 0 && utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s))
	for {
		// Copy the run up to the next escape; ranging over a string yields
		// U+FFFD for each invalid byte.
		n := strings.IndexByte(s, '\\')
		if n < 0 {
			n = len(s)
		}
		if run := s[:n]; utf8.ValidString(run) {
			b = append(b, run...)
		} else {
			for _, r := range run {
				b = utf8.AppendRune(b, r)
			}
		}
		if n == len(s) {
			return string(b)
		}
		e := s[n+1]
		s = s[n+2:]
		switch e {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(s)
			s = s[4:]
			if utf16.IsSurrogate(r) {
				// A pair only if the next escape completes it; else U+FFFD
				// and the next escape is read on its own.
				r2 := rune(-1)
				if strings.HasPrefix(s, `\u`) {
					r2 = hex4(s[2:])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					s = s[6:]
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default: // '"', '\\', '/'
			b = append(b, e)
		}
	}
}

// hex4 reads four hex digits (validated already); -1 if s is too short.
func hex4(s string) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
