package fakeprovider

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// vendor is one wire format. The Server decides what happens to a call; a
// vendor only says how that looks on the wire, so every scenario feature works
// on both endpoints.
type vendor interface {
	name() string
	// auth rejects a request whose key is missing or, when want is set, wrong.
	auth(r *http.Request, want string, e *errInfo) *reply
	// parse reads the body; a non-nil reply is the vendor's validation error.
	parse(r *http.Request, body []byte, e *errInfo) (*call, *reply)
	// fail renders an error action.
	fail(a Action, st Step, e *errInfo) *reply
	// refusalIsAnswer: the vendor answers a policy block with a billed 200.
	refusalIsAnswer() bool
	notFound(r *http.Request, e *errInfo) *reply
	requestID(r rnd) string
	answerID(r rnd) string
	// headers sets what every response carries: request id, rate-limit state.
	headers(h http.Header, e *errInfo)
	body(c *call, a *answer) []byte
	// stream splits an answer into SSE frames: the opening frames, one frame per
	// content chunk, and the closing frames, so a stream can be cut between chunks.
	stream(c *call, a *answer) (head, deltas, tail [][]byte)
	streamError(e *errInfo) []byte
}

// errInfo is what an error body or header may mention.
type errInfo struct {
	reqID      string
	orgID      string
	method     string
	path       string
	key        string // the key the client sent, for the 401 message
	call       *call  // nil when the body did not parse
	now        time.Time
	rate       *rateHeaders // nil without a rate limit
	hit        *limitHit    // which bucket refused, nil when scripted
	retryAfter time.Duration
	ctxLimit   int // 0: the vendor's default context window
	latency    time.Duration
}

func (e *errInfo) model(fallback string) string {
	if e.call != nil && e.call.model != "" {
		return e.call.model
	}
	return fallback
}

// reply is a complete error response.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func newReply(v vendor, e *errInfo, status int, body []byte) *reply {
	h := http.Header{}
	v.headers(h, e)
	h.Set("Content-Type", "application/json")
	return &reply{status: status, header: h, body: body}
}

// retryHeaders sends both spellings the SDKs read; retry-after-ms first in
// their order of preference, so a sub-second wait is not rounded to a second.
func retryHeaders(h http.Header, d time.Duration) {
	if d <= 0 {
		return
	}
	h.Set("retry-after-ms", strconv.FormatInt(d.Milliseconds(), 10))
	h.Set("retry-after", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
}

// marshal writes JSON without HTML escaping: vendors send "&" as is
// ("Plans & Billing"), and byte-faithful bodies are the point of this package.
func marshal(v any, indent string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	_ = enc.Encode(v)
	if indent == "" {
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	return buf.Bytes()
}

// rnd is a deterministic byte source: the same scenario seed and request
// sequence give the same ids, so two runs of a scenario can be diffed.
type rnd [32]byte

func newRnd(seed int64, parts ...string) rnd {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	var r rnd
	copy(r[:], h.Sum(nil))
	return r
}

// float is uniform in [0, 1).
func (r rnd) float() float64 { return float64(binary.BigEndian.Uint64(r[:8])>>11) / (1 << 53) }

func (r rnd) text(n int, alphabet string) string {
	out := make([]byte, n)
	src := r
	for i := range out {
		if i > 0 && i%len(src) == 0 {
			src = sha256.Sum256(src[:])
		}
		out[i] = alphabet[int(src[i%len(src)])%len(alphabet)]
	}
	return string(out)
}

const (
	alnum  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	base58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	hexdig = "0123456789abcdef"
)

// chunks splits an answer the way a model streams it: a few characters at a time.
func chunks(s string) []string {
	const size = 12
	var out []string
	for len(s) > 0 {
		n := 0
		for n < len(s) && n < size {
			_, w := utf8.DecodeRuneInString(s[n:])
			n += w
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// garbageBody is what an Envoy proxy in front of a vendor says when its
// upstream resets: text, not JSON, yet some proxies send it with a 200.
const garbageBody = "upstream connect error or disconnect/reset before headers. reset reason: connection termination"
