package classify

// The encoding/json body reader that wire.go replaced, kept as the oracle
// for FuzzParseBodyMatchesEncodingJSON: the fast reader must fill facts
// exactly as this one did, for any body.

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// scalar renders a JSON string or number as text; null and other kinds give "".
func refScalar(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return string(raw)
	}
	return ""
}

type refWireDetail struct {
	Type       string `json:"@type"`
	Reason     string `json:"reason"`
	RetryDelay string `json:"retryDelay"`
	Violations []struct {
		QuotaID string `json:"quotaId"`
	} `json:"violations"`
	Metadata struct {
		QuotaLimitValue string `json:"quota_limit_value"`
		QuotaLimit      string `json:"quota_limit"`
	} `json:"metadata"`
}

type refWireError struct {
	Message    string          `json:"message"`
	Type       json.RawMessage `json:"type"`
	Code       json.RawMessage `json:"code"`
	Status     json.RawMessage `json:"status"`
	Details    json.RawMessage `json:"details"`
	ErrorType  string          `json:"error_type"`
	InnerError *struct {
		Code string `json:"code"`
	} `json:"innererror"`
	InnerError2 *struct {
		Code string `json:"code"`
	} `json:"inner_error"`
	Errors []struct {
		Reason string `json:"reason"`
	} `json:"errors"`
	Metadata *struct {
		ErrorType    string          `json:"error_type"`
		Raw          json.RawMessage `json:"raw"`
		ProviderName string          `json:"provider_name"`
		LimitSource  string          `json:"limit_source"`
	} `json:"metadata"`
}

type refWireBody struct {
	Error     json.RawMessage `json:"error"`
	Errors    json.RawMessage `json:"errors"`
	Object    string          `json:"object"`
	Type      json.RawMessage `json:"type"`
	Message   string          `json:"message"`
	Code      json.RawMessage `json:"code"`
	ErrorType string          `json:"error_type"`
	Choices   []struct {
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	PromptFeedback struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	Candidates []struct {
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	Output struct {
		Type string `json:"__type"`
	} `json:"output"`
}

// parseBody fills f from a response body. It never fails: what it cannot read
// it leaves empty, and the status rules decide.
func refParseBody(f *facts, body []byte) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return
	}
	switch body[0] {
	case '"', '[', '{', '<':
	default:
		// A plain-text error body is kept as the message (cut to
		// maxTextBody bytes on a rune boundary); a JSON scalar or an SSE
		// stream is not.
		if !bytes.HasPrefix(body, []byte("data:")) && !bytes.HasPrefix(body, []byte("event:")) && !json.Valid(body) {
			t := string(body)
			for len(t) > maxTextBody {
				_, n := utf8.DecodeLastRuneInString(t)
				t = t[:len(t)-n]
			}
			f.text, f.msg = t, t
		}
		return
	}
	switch body[0] {
	case '"': // xAI: the whole body is one JSON string
		var s string
		if json.Unmarshal(body, &s) == nil {
			f.msg, f.bare, f.structured, f.hasError = s, true, true, true
		}
		return
	case '[': // Gemini streamGenerateContent: [{"error":…}]
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) != nil || len(arr) == 0 {
			return
		}
		body = bytes.TrimSpace(arr[0])
		if len(body) == 0 || body[0] != '{' {
			return
		}
	case '{':
	default:
		return
	}
	var w refWireBody
	// A type mismatch in one field still fills the others (encoding/json keeps
	// going), so the error is deliberately ignored; a syntax error leaves w empty.
	_ = json.Unmarshal(body, &w)
	for _, c := range w.Choices {
		if c.FinishReason == "error" {
			f.hasError, f.finishError = true, true
		}
	}
	var finish []string
	for _, c := range w.Candidates {
		finish = append(finish, c.FinishReason)
	}
	f.fromGeneration(w.PromptFeedback.BlockReason, finish, w.Output.Type)
	if w.ErrorType != "" {
		f.metaErrorType = w.ErrorType
	}
	errRaw := bytes.TrimSpace(w.Error)
	switch {
	case len(errRaw) > 0 && errRaw[0] == '{':
		var e refWireError
		_ = json.Unmarshal(errRaw, &e)
		refFromError(f, &e)
	case len(errRaw) > 0 && errRaw[0] == '"': // Ollama native: {"error":"…"}
		f.msg = refScalar(errRaw)
		f.structured, f.hasError = true, true
	case len(errRaw) > 0 && errRaw[0] == '[': // Cloudflare envelope: "error":[{code,message}]
		refFromCloudflare(f, errRaw)
	}
	if errs := bytes.TrimSpace(w.Errors); len(errs) > 0 && errs[0] == '[' && len(f.cfCodes) == 0 {
		refFromCloudflare(f, errs)
	}
	if !f.structured && (w.Object == "error" || w.Message != "") {
		// vLLM (old) and Mistral: {"object":"error","message","type","code"};
		// Bedrock and legacy Mistral: {"message": …}.
		f.msg = w.Message
		f.typ = refScalar(w.Type)
		f.code = refScalar(w.Code)
		f.structured = true
		f.hasError = f.hasError || w.Object == "error"
	}
}

func refFromError(f *facts, e *refWireError) {
	f.structured, f.hasError = true, true
	f.msg = e.Message
	f.typ = refScalar(e.Type)
	f.code = refScalar(e.Code)
	f.gstatus = refScalar(e.Status)
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
		raw := bytes.TrimSpace(m.Raw)
		if len(raw) > 0 && raw[0] == '"' {
			f.metaRaw = refScalar(raw)
		} else if len(raw) > 0 && raw[0] == '{' {
			f.metaRaw = string(raw)
		}
	}
	d := bytes.TrimSpace(e.Details)
	switch {
	case len(d) > 0 && d[0] == '[': // Google details[]
		var ds []refWireDetail
		_ = json.Unmarshal(d, &ds)
		for _, x := range ds {
			switch {
			case strings.HasSuffix(x.Type, "google.rpc.ErrorInfo"):
				if x.Reason != "" {
					f.reasons = append(f.reasons, x.Reason)
				}
				if x.Metadata.QuotaLimit != "" {
					f.quotaLimits = append(f.quotaLimits, x.Metadata.QuotaLimit)
				}
				f.limitZero = f.limitZero || x.Metadata.QuotaLimitValue == "0"
			case strings.HasSuffix(x.Type, "google.rpc.QuotaFailure"):
				for _, v := range x.Violations {
					f.quotaIDs = append(f.quotaIDs, v.QuotaID)
				}
			case strings.HasSuffix(x.Type, "google.rpc.RetryInfo"):
				f.retryDelay = x.RetryDelay
			}
		}
	case len(d) > 0 && d[0] == '{': // Anthropic details{error_code}
		var ad struct {
			ErrorCode string `json:"error_code"`
		}
		_ = json.Unmarshal(d, &ad)
		f.detailsErrorCode = ad.ErrorCode
	}
}

func refFromCloudflare(f *facts, raw json.RawMessage) {
	var items []struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	}
	_ = json.Unmarshal(raw, &items)
	for _, it := range items {
		if n, err := strconv.Atoi(refScalar(it.Code)); err == nil {
			f.cfCodes = append(f.cfCodes, n)
		}
		if f.msg == "" {
			f.msg = it.Message
		}
	}
	if len(items) > 0 {
		f.structured, f.hasError = true, true
	}
}

// checkSameFacts fails when the fast reader and the encoding/json oracle
// disagree about body.
func checkSameFacts(t *testing.T, body string) {
	t.Helper()
	var got, want facts
	got.parseBody(body)
	got.msg = got.message() // the oracle decodes the message eagerly
	refParseBody(&want, []byte(body))
	// nil and empty slices are the same to every rule.
	for _, f := range []*facts{&got, &want} {
		if len(f.reasons) == 0 {
			f.reasons = nil
		}
		if len(f.quotaIDs) == 0 {
			f.quotaIDs = nil
		}
		if len(f.cfCodes) == 0 {
			f.cfCodes = nil
		}
		if len(f.quotaLimits) == 0 {
			f.quotaLimits = nil
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body %q:\n got  %+v\n want %+v", body, got, want)
	}
}

// edgeBodies are the corners where a hand-written reader would most likely
// part from encoding/json: invalid JSON, nesting limits, case-folded and
// escaped names, repeated members, nulls, wrong kinds, bad UTF-8.
var edgeBodies = []string{
	"", " ", "null", "42", `"bare string"`, `"bad \ud800 surrogate \ud800\u0041"`, "[]", "[1]", `[{"error":{"code":429}}]`,
	`{"error":"ollama says no"}`, `{"error":[{"code":2009,"message":"Unauthorized"}]}`, `{"errors":[{"code":"10000"}],"error":[]}`,
	`{"ERROR":{"MESSAGE":"case","Type":"x","CODE":12.5e1}}`, `{"\u0065rror":{"message":"escaped key"}}`,
	`{"error":{"message":"dup"},"error":{"type":"second"}}`,
	`{"choices":[{"finish_reason":"error"}],"choices":[{}]}`,
	`{"choices":[{},{},{"finish_reason":"error"}],"choices":[{}],"choices":[{},{},{}]}`,
	`{"error":{"metadata":{"raw":"{\"a\":1}"},"metadata":{"provider_name":"OpenAI"}}}`,
	`{"error":{"innererror":"x","inner_error":{"code":"Y"}}}`, `{"error":{"innererror":null,"inner_error":{"code":"Y"}}}`,
	`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"A"}],"violations":[{}, {"quotaId":"B"}]}]}}`,
	`{"error":{"meſſage":"long s folds to s","ſtatus":"PERMISSION_DENIED"}}`,
	`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"5s"},{"@type":"x.google.rpc.RetryInfo"}]}}`,
	`{"error":{"details":{"error_code":"enforced_spend_limit_reached"}}}`, `{"error":{"message":"\u00e9\ud83d\ude00 \/ \"q\""}}`,
	"{\"error\":{\"message\":\"bad utf8 \xff\xfe\"}}", `{"message":null,"object":"error","type":5,"code":null}`,
	`{"promptFeedback":{"blockReason":"SAFETY"},"promptFeedback":null,"promptFeedback":{"other":1}}`,
	`{"promptFeedback":"x","candidates":[{"finishReason":"STOP"},{"finishReason":"SAFETY"}],"candidates":[{}]}`,
	`{"Output":{"__type":"com.amazon.coral.service#UnknownOperationException"},"Version":"1.0"}`, `{"output":[1],"OUTPUT":{"__TYPE":"x#Y"}}`,
	`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","metadata":{"quota_limit_value":"0","quota_limit":"PerDay"},"metadata":"x"}]}}`,
	`{"error":{"code":1} `, `{"a":01}`, `{"a":1,}`, "\u00a0{\"error\":{\"type\":\"x\"}}",
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	`{"error":{"type":"x"},"deep":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
	`{"error":{"type":"x"},"deep":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
}

func TestParseBodyMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	bodies := append([]string(nil), edgeBodies...)
	for _, fx := range loadFixtures(t) {
		bodies = append(bodies, fx.Observation.Body)
	}
	for _, b := range bodies {
		checkSameFacts(t, b)
	}
}

func FuzzParseBodyMatchesEncodingJSON(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(fx.Observation.Body)
	}
	for _, b := range edgeBodies {
		f.Add(b)
	}
	f.Fuzz(checkSameFacts)
}
