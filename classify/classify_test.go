package classify

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// corpusDirs are the testdata directories scored by class in
// corpus_test.go rather than pinned verdicts.
var corpusDirs = []string{corpusDir, holdoutDir, corpus21Dir, holdout21Dir, corpus21bDir, holdout21bDir, corpus21cDir, holdout21cDir, corpus21dDir, holdout21dDir, corpus21eDir, holdout21eDir, corpus21fDir, holdout21fDir, corpus21gDir, holdout21gDir, corpus21hDir, holdout21hDir, corpus21iDir, holdout21iDir}

type fixture struct {
	Observation Observation `json:"observation"`
	Want        Verdict     `json:"want"`
	Source      string      `json:"source"`
}

func loadFixtures(tb testing.TB) map[string]fixture {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	require.NoError(tb, err)
	require.NotEmpty(tb, paths)
	out := make(map[string]fixture, len(paths))
	for _, p := range paths {
		if d := filepath.Base(filepath.Dir(p)); slices.Contains(corpusDirs, d) {
			continue // scored by class in corpus_test.go, not pinned verdicts
		}
		var fx fixture
		decodeStrict(tb, p, &fx)
		require.NotEmpty(tb, fx.Source, "%s: every fixture names where its body came from", p)
		out[p] = fx
	}
	return out
}

// updateFixtures rewrites each fixture's "want" with the verdict it gets
// (TRIAGE_UPDATE_FIXTURES=1 go test -run TestClassifyFixtures ./classify);
// review the diff before committing it.
var updateFixtures = os.Getenv("TRIAGE_UPDATE_FIXTURES") != ""

func TestClassifyFixtures(t *testing.T) {
	t.Parallel()
	for name, fx := range loadFixtures(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := Classify(fx.Observation)
			if updateFixtures && jsonOf(t, fx.Want) != jsonOf(t, got) {
				fx.Want = got
				var b strings.Builder
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				require.NoError(t, enc.Encode(fx))
				require.NoError(t, os.WriteFile(name, []byte(b.String()), 0o644))
				return
			}
			require.Equal(t, jsonOf(t, fx.Want), jsonOf(t, got))
		})
	}
}

// TestEveryRuleHasAFixture fails when a rule row is never fired by any
// fixture: each row must be pinned by a real body in testdata/.
func TestEveryRuleHasAFixture(t *testing.T) {
	t.Parallel()
	fired := map[string]bool{}
	for _, fx := range loadFixtures(t) {
		tr := &tracer{}
		(*Classifier)(nil).classify(fx.Observation, 0, tr)
		for _, id := range tr.ids {
			fired[id] = true
		}
	}
	var missing []string
	for _, id := range ruleIDs() {
		if !fired[id] {
			missing = append(missing, id)
		}
	}
	slices.Sort(missing)
	require.Empty(t, missing, "rule rows without a fixture")
}

func TestRuleReasonsUniquePerTable(t *testing.T) {
	t.Parallel()
	ids := ruleIDs()
	seen := map[string]bool{}
	for _, id := range ids {
		require.False(t, seen[id], "duplicate rule id %s", id)
		seen[id] = true
	}
}

func TestEveryVendorHasAChain(t *testing.T) {
	t.Parallel()
	want := strings.Fields("openai anthropic gemini vertex azure-openai bedrock openrouter " +
		"cloudflare-ai-gateway mistral groq deepseek together fireworks xai cohere vllm ollama litellm-proxy other")
	slices.Sort(want)
	require.Equal(t, want, Vendors())
}

func TestBoundaries(t *testing.T) {
	t.Parallel()
	obs := func(vendor string, status int, headers map[string]string, body string) Observation {
		return Observation{Vendor: vendor, Path: PathDirect, Phase: PhaseResponse, Status: status, Headers: headers, Body: body}
	}
	tests := []struct {
		name    string
		o       Observation
		class   Class
		reason  string
		retry   *float64
		known   bool
		skipFor string
	}{
		{name: "unrelated 400 never retries", o: obs("openai", 400,
			nil, `{"error":{"message":"Invalid value for 'temperature'","type":"invalid_request_error","param":"temperature","code":null}}`),
			class: Rejected, reason: "bad_request", known: true},
		{name: "400 with no body never retries", o: obs("other", 400, nil, ""), class: Rejected, reason: "unknown_4xx"},
		{name: "gateway bare 429 without a wait is exhausted", o: Observation{Vendor: "litellm-proxy", Path: PathGateway,
			Phase: PhaseResponse, Status: 429}, class: Exhausted, reason: "gateway_429_unexplained"},
		{name: "router bare 429 with retry-after is throttled", o: Observation{Vendor: "openrouter", Path: PathRouter,
			Phase: PhaseResponse, Status: 429, Headers: map[string]string{"Retry-After": "7"}},
			class: Throttled, reason: "gateway_rate_limit", retry: ptr(7.0), known: true},
		{name: "direct bare 429 is pacing", o: obs("openai", 429, nil, ""), class: Throttled, reason: "rate_limit", known: true},
		{name: "spend-cap 429 without retry-after is exhausted", o: obs("openai", 429, nil,
			`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`),
			class: Exhausted, reason: "billing_quota", known: true},
		{name: "spend cap keeps its hint but stays exhausted", o: obs("openai", 429, map[string]string{"retry-after": "3600"},
			`{"error":{"message":"x","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`),
			class: Exhausted, reason: "billing_quota", retry: ptr(3600.0), known: true},
		{name: "throttle with retry-after seconds", o: obs("anthropic", 429, map[string]string{"retry-after": "20"},
			`{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}`),
			class: Throttled, reason: "rate_limit", retry: ptr(20.0), known: true},
		{name: "retry-after HTTP date against the Date header", o: obs("openai", 429, map[string]string{
			"Retry-After": "Wed, 21 Oct 2015 07:28:30 GMT", "Date": "Wed, 21 Oct 2015 07:28:00 GMT"}, ""),
			class: Throttled, reason: "rate_limit", retry: ptr(30.0), known: true},
		{name: "retry-after HTTP date in the past is zero", o: obs("openai", 429, map[string]string{
			"Retry-After": "Wed, 21 Oct 2015 07:27:00 GMT", "Date": "Wed, 21 Oct 2015 07:28:00 GMT"}, ""),
			class: Throttled, reason: "rate_limit", retry: ptr(0.0), known: true},
		{name: "retry-after HTTP date without Date header", o: obs("openai", 429, map[string]string{
			"Retry-After": "Wed, 21 Oct 2015 07:28:30 GMT"}, ""),
			class: Throttled, reason: "rate_limit+retry_after_undated", known: true},
		{name: "retry-after-ms wins over retry-after", o: obs("anthropic", 529, map[string]string{
			"retry-after-ms": "1500", "retry-after": "9"}, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			class: Transient, reason: "overloaded", retry: ptr(1.5), known: true},
		{name: "gemini fractional retryDelay", o: obs("gemini", 429, nil,
			`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}`),
			class: Throttled, reason: "resource_exhausted", retry: ptr(1.5), known: true},
		{name: "gemini per-day ignores the short retryDelay for the class", o: obs("gemini", 429, nil,
			`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}`),
			class: Exhausted, reason: "quota_per_day", retry: ptr(26.0), known: true},
		{name: "x-should-retry false stops a 5xx", o: obs("anthropic", 500, map[string]string{"X-Should-Retry": "false"},
			`{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`),
			class: Rejected, reason: "overloaded+x_should_retry_false", known: true},
		{name: "x-should-retry false on a rate limit is an account stop", o: obs("anthropic", 429, map[string]string{"x-should-retry": "false"},
			`{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}`),
			class: Exhausted, reason: "rate_limit+x_should_retry_false", known: true},
		{name: "x-should-retry true lifts an unknown 4xx", o: obs("anthropic", 409, map[string]string{"x-should-retry": "true"}, ""),
			class: Transient, reason: "x_should_retry_true", known: true},
		{name: "x-should-retry true never makes exhausted retryable", o: obs("anthropic", 400, map[string]string{"x-should-retry": "true"},
			`{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`),
			class: Exhausted, reason: "credit_balance_too_low", known: true},
		{name: "x-should-retry true never makes a known rejection retryable", o: obs("openai", 400, map[string]string{"x-should-retry": "true"},
			`{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`),
			class: Rejected, reason: "bad_request", known: true},
		{name: "stream phase is ambiguous even for a rate limit event", o: Observation{Vendor: "anthropic", Phase: PhaseStream, Status: 200,
			Body: "event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"x\"}}\n\n"},
			class: Ambiguous, reason: "stream_failed", known: true},
		{name: "1xx is odd", o: obs("openai", 101, nil, ""), class: Rejected, reason: "unexpected_status"},
		{name: "3xx is odd", o: obs("openai", 302, nil, ""), class: Rejected, reason: "unexpected_status"},
		{name: "unknown vendor uses generic rules", o: obs("nonesuch", 429, nil,
			`{"error":{"message":"x","type":"insufficient_quota","code":"insufficient_quota"}}`),
			class: Exhausted, reason: "billing_quota", known: true},
		{name: "headers are case-insensitive", o: obs("bedrock", 429, map[string]string{"X-AMZN-ERRORTYPE": "ThrottlingException:x"},
			`{"message":"Too many requests, please wait before trying again."}`), class: Throttled, reason: "throttled", known: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Classify(tt.o)
			require.Equal(t, tt.class, got.Class)
			require.Equal(t, tt.reason, got.Reason)
			require.Equal(t, tt.known, got.Known)
			require.Equal(t, tt.retry, got.RetryAfterS)
		})
	}
}

// TestTerminalNeverRetrying checks the two mistakes that must never happen,
// over every fixture: a body a rule calls exhausted or rejected must not be
// made retrying by headers, and an exhausted key body is never rejected.
func TestTerminalNeverRetrying(t *testing.T) {
	t.Parallel()
	for name, fx := range loadFixtures(t) {
		if fx.Want.Class != Exhausted && fx.Want.Class != Rejected || !fx.Want.Known {
			continue
		}
		for _, h := range []map[string]string{
			{"x-should-retry": "true"}, {"retry-after": "1"}, {"retry-after-ms": "10"},
		} {
			o := fx.Observation
			merged := map[string]string{}
			for k, v := range o.Headers {
				merged[k] = v
			}
			for k, v := range h {
				merged[k] = v
			}
			o.Headers = merged
			got := Classify(o)
			require.Contains(t, []Class{Exhausted, Rejected}, got.Class, "%s with %v", name, h)
			if fx.Want.Class == Exhausted {
				require.Equal(t, Exhausted, got.Class, "%s with %v", name, h)
			}
		}
	}
}

func jsonOf(t *testing.T, v Verdict) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func FuzzClassify(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		o := fx.Observation
		h, _ := json.Marshal(o.Headers)
		f.Add(o.Vendor, string(o.Path), string(o.Phase), o.Status, string(h), o.Body)
	}
	f.Fuzz(func(t *testing.T, vendor, path, phase string, status int, headers, body string) {
		var h map[string]string
		_ = json.Unmarshal([]byte(headers), &h)
		o := Observation{Vendor: vendor, Path: Path(path), Phase: Phase(phase), Status: status, Headers: h, Body: body}
		v1 := Classify(o)
		v2 := Classify(o)
		if _, err := v1.Class.MarshalText(); err != nil {
			t.Fatalf("invalid class %v", v1.Class)
		}
		if v1.Reason == "" {
			t.Fatal("empty reason")
		}
		b1, _ := json.Marshal(v1)
		b2, _ := json.Marshal(v2)
		if string(b1) != string(b2) {
			t.Fatalf("not deterministic: %s vs %s", b1, b2)
		}
		if v1.RetryAfterS != nil && (*v1.RetryAfterS < 0 || *v1.RetryAfterS != *v1.RetryAfterS) {
			t.Fatalf("bad retry_after_s %v", *v1.RetryAfterS)
		}
	})
}

func BenchmarkClassify(b *testing.B) {
	// A typical ~1 KB error: the Gemini per-minute 429 with RetryInfo.
	// ns/op is wall time per call; cpu-ns/op the process's CPU time per
	// call, which a loaded machine does not inflate.
	fx := loadFixtures(b)[filepath.Join("testdata", "gemini", "quota_per_minute_retryinfo_429.json")]
	o := fx.Observation
	b.SetBytes(int64(len(o.Body)))
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		Classify(o)
	}
	reportCPU(b, cpu)
}

// BenchmarkClassifySignal is a body no vendor row knows, decided by the
// signal layer: Moonshot's tokens-per-day window on a 429 (vendor other).
func BenchmarkClassifySignal(b *testing.B) {
	fx := loadFixtures(b)[filepath.Join("testdata", "signal", "quota_window_tpd_moonshot_429.json")]
	o := fx.Observation
	b.SetBytes(int64(len(o.Body)))
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		Classify(o)
	}
	reportCPU(b, cpu)
}

func TestCodeIsBoundedToASafeSlug(t *testing.T) {
	t.Parallel()
	body := `{"error":{"message":"x","type":"invalid_request_error","code":"` +
		strings.Repeat("A", 100) + `\u001b[31m\nforged log line"}}`
	v := Classify(Observation{Vendor: "openai", Phase: PhaseResponse, Status: 400, Body: body})
	require.NotNil(t, v.Code)
	require.LessOrEqual(t, len(*v.Code), CodeMaxBytes)
	require.Regexp(t, `^[A-Za-z0-9._:/-]+$`, *v.Code)

	v = Classify(Observation{Vendor: "openai", Phase: PhaseResponse, Status: 400,
		Body: `{"error":{"message":"x","code":"bad code\u001b]0;pwned\u0007"}}`})
	require.Equal(t, "bad_code__0_pwned_", *v.Code)
	v = Classify(Observation{Vendor: "openai", Phase: PhaseResponse, Status: 429,
		Body: `{"error":{"message":"x","type":"insufficient_quota","code":"insufficient_quota"}}`})
	require.Equal(t, "insufficient_quota", *v.Code, "real codes are unchanged")
}

// decodeStrict reads one testdata JSON file into v, refusing fields the
// type does not know, so a misspelt key in a fixture fails loudly.
func decodeStrict(tb testing.TB, path string, v any) {
	tb.Helper()
	b, err := os.ReadFile(path)
	require.NoError(tb, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(tb, dec.Decode(v), path)
}
