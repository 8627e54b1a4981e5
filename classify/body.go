package classify

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// facts is everything the rule tables look at, extracted once per Observation.
// Field comments name the body field each value comes from.
type facts struct {
	vendor string
	path   Path
	status int

	structured bool // the body parsed as one of the known error envelopes

	typ     string // error.type (Python exception class for vLLM)
	code    string // error.code, as text (numbers too)
	gstatus string // error.status: gRPC canonical name (Google) or a number (Azure)
	msg     string // error.message, a bare JSON string body, or {"message":…}: the raw literal, see message
	text    string // a body that is not JSON (a proxy's or server's text/plain error), up to maxTextBody bytes
	lmsg    string // the message lowered, for the narrow text backups (see lower)
	lowered bool   // lmsg is set

	detailsErrorCode string   // error.details.error_code (Anthropic)
	innerCode        string   // error.innererror.code / inner_error.code (Azure)
	reasons          []string // details[] ErrorInfo.reason and errors[].reason (Google)
	quotaIDs         []string // details[] QuotaFailure.violations[].quotaId (Google)
	retryDelay       string   // details[] RetryInfo.retryDelay (Google)

	metaErrorType string // error.metadata.error_type or top-level error_type (OpenRouter)
	metaRaw       string // error.metadata.raw, upstream body as a string (OpenRouter)
	metaProvider  string // error.metadata.provider_name (OpenRouter)
	limitSource   string // error.metadata.limit_source (OpenRouter)

	quotaLimits []string // details[] ErrorInfo.metadata.quota_limit (Google)
	limitZero   bool     // details[] ErrorInfo.metadata.quota_limit_value is "0" (Google)

	blockReason   string // promptFeedback.blockReason (Gemini, Vertex: the prompt was blocked)
	blockedFinish string // the first candidates[].finishReason that means the output was blocked

	cfCodes     []int  // error[] / errors[] code (Cloudflare envelope)
	bare        bool   // body is a bare JSON string (xAI)
	hasError    bool   // the body carries an error (for 2xx bodies)
	finishError bool   // choices[].finish_reason is "error": generation started, then failed (OpenRouter)
	amzType     string // x-amzn-ErrorType header, before the first ':'
	baseResp    string // base_resp.status_code (MiniMax) in a 2xx body, set by classifyOtherErrorIn2xx

	hint    *float64 // the wait the response asked for (see retryHint)
	undated bool     // retry-after was an HTTP date with no Date header to measure it by
}

// factsPool holds scratch facts between calls. The rule tables read facts
// through func values, so a facts value escapes to the heap; reusing one
// (and its slices' capacity) saves that allocation on every call. Nothing
// carries over: newFacts resets every field, and no Verdict points into a
// facts value.
var factsPool = sync.Pool{New: func() any { return new(facts) }}

// newFacts returns reset facts for o from the pool; releaseFacts returns
// them.
func newFacts(o Observation) *facts {
	f := factsPool.Get().(*facts)
	reasons := f.reasons[:0]
	*f = facts{vendor: o.Vendor, path: o.Path, status: o.Status, reasons: reasons}
	return f
}

func releaseFacts(f *facts) {
	clear(f.reasons) // drop references to the body's strings
	*f = facts{reasons: f.reasons[:0]}
	factsPool.Put(f)
}

// scalar renders a raw JSON string or number as text; null and other kinds
// give "".
func scalar(raw string) string {
	if raw == "" {
		return ""
	}
	switch raw[0] {
	case '"':
		return unquote(raw)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return raw
	}
	return ""
}

// parseBody fills f from a response body. It never fails: what it cannot read
// it leaves empty, and the status rules decide. The body is validated once
// and then only the members the rules read are decoded (wire.go).
func (f *facts) parseBody(body string) {
	body = strings.TrimSpace(body)
	if body == "" {
		return
	}
	switch body[0] {
	case '"', '[', '{':
	case '<': // an HTML error page: nothing a rule reads
		return
	default:
		// A plain-text error (LM Studio's "Failed to load model …", a
		// router's "exceeded retry limit, last status: 429 …"): the text is
		// the message the text rules and the model wordings read. An SSE
		// stream is read elsewhere (classifyStreamError).
		if !strings.HasPrefix(body, "data:") && !strings.HasPrefix(body, "event:") && !validJSON(body) {
			f.text = cutText(body)
		}
		return
	}
	if !validJSON(body) {
		return
	}
	switch body[0] {
	case '"': // xAI: the whole body is one JSON string
		f.msg, f.bare, f.structured, f.hasError = body, true, true, true
		return
	case '[': // Gemini streamGenerateContent: [{"error":…}]
		v := skipSpace(body, 1)
		if body[v] != '{' {
			return
		}
		body = body[v:valueEnd(body, v)]
	}
	var w wireBody
	w.decode(body, 0)
	for _, c := range w.Choices {
		if c.FinishReason == "error" {
			f.hasError, f.finishError = true, true
		}
	}
	if w.BlockReason != "" || len(w.Candidates) > 0 || w.OutputType != "" {
		var finish []string
		for _, c := range w.Candidates {
			finish = append(finish, c.FinishReason)
		}
		f.fromGeneration(w.BlockReason, finish, w.OutputType)
	}
	if w.ErrorType != "" {
		f.metaErrorType = w.ErrorType
	}
	switch {
	case strings.HasPrefix(w.Error, "{"):
		f.fromError(&w.err)
	case strings.HasPrefix(w.Error, `"`): // Ollama native: {"error":"…"}
		f.msg = w.Error
		f.structured, f.hasError = true, true
	case strings.HasPrefix(w.Error, "["): // Cloudflare envelope: "error":[{code,message}]
		f.fromCloudflare(w.Error)
	}
	if strings.HasPrefix(w.Errors, "[") && len(f.cfCodes) == 0 {
		f.fromCloudflare(w.Errors)
	}
	if !f.structured && (w.Object == "error" || !emptyString(w.Message)) {
		// vLLM (old) and Mistral: {"object":"error","message","type","code"};
		// Bedrock and legacy Mistral: {"message": …}.
		f.msg = w.Message
		f.typ = scalar(w.Type)
		f.code = scalar(w.Code)
		f.structured = true
		f.hasError = f.hasError || w.Object == "error"
	}
}

// blockedFinishReasons are the Gemini/Vertex finishReason values that mean
// the content was blocked (ai.google.dev FinishReason): resending the same
// request is blocked the same way.
var blockedFinishReasons = []string{"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}

// fromGeneration reads what a 2xx body says about itself: a blocked prompt,
// a blocked candidate, or an AWS JSON-protocol error envelope
// ({"Output":{"__type":"…#UnknownOperationException"}}) sent with a 200.
func (f *facts) fromGeneration(blockReason string, finish []string, outputType string) {
	if blockReason != "" {
		f.blockReason, f.hasError = blockReason, true
	}
	for _, r := range finish {
		if slices.Contains(blockedFinishReasons, r) {
			f.blockedFinish, f.hasError = r, true
			break
		}
	}
	if outputType != "" {
		_, name, _ := strings.Cut(outputType, "#")
		if name == "" {
			name = outputType
		}
		f.amzType, f.structured, f.hasError = name, true, true
	}
}

func (f *facts) fromError(e *wireError) {
	f.structured, f.hasError = true, true
	f.msg = e.Message
	f.typ = scalar(e.Type)
	f.code = scalar(e.Code)
	f.gstatus = scalar(e.Status)
	if e.ErrorType != "" {
		f.metaErrorType = e.ErrorType
	}
	if e.InnerError != nil {
		f.innerCode = e.InnerError.Code
	} else if e.InnerError2 != nil {
		f.innerCode = e.InnerError2.Code
	}
	for _, r := range e.Errors {
		if r.Reason != "" {
			f.reasons = append(f.reasons, r.Reason)
		}
	}
	if m := e.Metadata; m != nil {
		if m.ErrorType != "" {
			f.metaErrorType = m.ErrorType
		}
		f.metaProvider, f.limitSource = m.ProviderName, m.LimitSource
		if strings.HasPrefix(m.Raw, `"`) {
			f.metaRaw = unquote(m.Raw)
		} else if strings.HasPrefix(m.Raw, "{") {
			f.metaRaw = m.Raw
		}
	}
	f.reasons = append(f.reasons, e.Details.reasons...)
	f.quotaIDs = e.Details.quotaIDs
	f.quotaLimits = e.Details.quotaLimits
	f.limitZero = e.Details.limitZero
	f.retryDelay = e.Details.retryDelay
	f.detailsErrorCode = e.Details.errorCode
}

func (f *facts) fromCloudflare(raw string) {
	n := 0
	scanArray(raw, 0, func(v int) int {
		n++
		var it wireCloudflareItem
		end := 0
		if raw[v] == '{' {
			end = it.decode(raw, v)
		} else {
			end = valueEnd(raw, v)
		}
		if c, err := strconv.Atoi(scalar(it.Code)); err == nil {
			f.cfCodes = append(f.cfCodes, c)
		}
		if emptyString(f.msg) {
			f.msg = it.Message
		}
		return end
	})
	if n > 0 {
		f.structured, f.hasError = true, true
	}
}

// message decodes the message literal. Most bodies are decided by
// structured fields, so it runs only when a rule reads the text.
func (f *facts) message() string {
	if f.msg == "" {
		return f.text
	}
	return unquote(f.msg)
}

// maxTextBody bounds the part of a plain-text body kept as its message: the
// wordings sit at the start, and a long body is a page, not an error.
const maxTextBody = 1024

// cutText is body cut to maxTextBody bytes on a rune boundary.
func cutText(body string) string {
	if len(body) <= maxTextBody {
		return body
	}
	n := maxTextBody
	for n > 0 && !utf8.RuneStart(body[n]) {
		n--
	}
	return body[:n]
}

// lower is the message lowered, computed on the first rule that reads text.
func (f *facts) lower() string {
	if !f.lowered {
		f.lmsg, f.lowered = strings.ToLower(f.message()), true
	}
	return f.lmsg
}

// emptyString reports whether a raw JSON string literal (or its absence)
// decodes to "".
func emptyString(raw string) bool { return raw == "" || raw == `""` }

// defaultCode is the vendor's own code for the Verdict: the most specific
// structured field present.
func (f *facts) defaultCode() string {
	switch {
	case f.detailsErrorCode != "":
		return f.detailsErrorCode
	case f.innerCode != "":
		return f.innerCode
	case len(f.reasons) > 0:
		return f.reasons[0]
	case f.code != "" && !isNumber(f.code):
		return f.code
	case f.typ != "":
		return f.typ
	case f.gstatus != "" && !isNumber(f.gstatus):
		return f.gstatus
	case f.metaErrorType != "":
		return f.metaErrorType
	case f.amzType != "":
		return f.amzType
	case len(f.cfCodes) > 0:
		return strconv.Itoa(f.cfCodes[0])
	case f.code != "":
		return f.code
	}
	return ""
}

func isNumber(s string) bool {
	// Only these can start a float strconv accepts; skipping ParseFloat for
	// the rest avoids allocating its error for every textual code.
	if s == "" || !strings.ContainsRune("+-.0123456789iInN", rune(s[0])) {
		return false
	}
	if allDigits(s) { // the common case, an HTTP-like code: no need to parse
		return true
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// lastStreamError finds the last SSE data line (or bare JSON line) that
// carries an error and returns its code, for stream-phase verdicts.
func lastStreamError(body string) string {
	code := ""
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		line = strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		if !strings.HasPrefix(line, "{") || !strings.Contains(line, "error") {
			continue
		}
		var g facts
		g.parseBody(line)
		if g.hasError {
			if c := g.defaultCode(); c != "" {
				code = c
			}
		}
	}
	return code
}
