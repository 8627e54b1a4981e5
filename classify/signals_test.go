package classify

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLexiconPinned: every lexicon entry names a testdata file that holds
// the vendor's exact body with the phrase in it, and that body, read by the
// signal layer, states the entry's signal. No entry may be read from the
// held-aside corpora.
func TestLexiconPinned(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, e := range lexicon {
		require.False(t, seen[e.phrase], "duplicate lexicon phrase %q", e.phrase)
		seen[e.phrase] = true
		require.Equal(t, strings.ToLower(e.phrase), e.phrase, "lexicon phrases are lower-case")
		dir := strings.Split(e.source, "/")[0]
		require.False(t, strings.HasPrefix(dir, "holdout"), "%q: a lexicon entry may not come from a holdout (%s)", e.phrase, e.source)
		raw, err := os.ReadFile(filepath.Join("testdata", e.source))
		require.NoError(t, err, "%q: source %s", e.phrase, e.source)
		var doc struct {
			Observation Observation `json:"observation"`
		}
		require.NoError(t, json.Unmarshal(raw, &doc), e.source)
		bs := readSignals(doc.Observation.Body)
		require.NotZero(t, bs.sigs&e.sig, "%q: %s does not state the signal", e.phrase, e.source)
		require.Contains(t, bodyText(doc.Observation.Body), e.phrase, e.source)
	}
}

// TestSignalPrecedence pins the order that turns signals into a class.
func TestSignalPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sigs   signal
		class  Class
		reason string
	}{
		{sigMoney | sigRate | sigShortWindow, Exhausted, "money"},
		{sigCredential | sigRate, Exhausted, "account"},
		{sigVerification, Exhausted, "account"},
		{sigPlan | sigLongWindow, Exhausted, "account"},
		{sigModel | sigCapacity, Exhausted, "model_unavailable"},
		{sigPolicy | sigContext, Rejected, "content_policy"},
		{sigContext | sigRate, Rejected, "context_or_size"},
		{sigLongWindow | sigRate | sigShortWindow, Exhausted, "quota_window"},
		{sigShortWindow, Throttled, "rate_limit"},
		{sigQuota, Throttled, "rate_limit"},
		{sigRate | sigCapacity, Throttled, "rate_limit"},
		{sigCapacity, Transient, "capacity"},
	}
	for _, tt := range tests {
		c, r, ok := signalVerdict(tt.sigs)
		require.True(t, ok)
		require.Equal(t, tt.class, c, "%b", tt.sigs)
		require.Equal(t, tt.reason, r, "%b", tt.sigs)
	}
	_, _, ok := signalVerdict(0)
	require.False(t, ok, "no signal: the status decides")
}

// TestSignalsReadAnyShape: a wrapped upstream body, base_resp, a bare
// string, problem+json and a stated wait in resets_in_seconds.
func TestSignalsReadAnyShape(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		o    Observation
		want Class
		wait float64
	}{
		{"upstream body inside a gateway's string", Observation{Vendor: "other", Path: PathGateway, Phase: PhaseResponse, Status: 500,
			Body: `{"error":{"message":"upstream: {\"error\":{\"message\":\"insufficient balance (1008)\"}}"}}`}, Exhausted, 0},
		{"problem+json", Observation{Vendor: "other", Path: PathGateway, Phase: PhaseResponse, Status: 429,
			Body: `{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"per day quota reached"}`}, Exhausted, 0},
		{"a 400 request error that states money", Observation{Vendor: "other", Phase: PhaseResponse, Status: 400,
			Body: `{"error":{"type":"invalid_request_error","code":"acct_x","message":"Insufficient balance, please recharge."}}`}, Exhausted, 0},
		{"a 429 that states money in Chinese", Observation{Vendor: "other", Phase: PhaseResponse, Status: 429,
			Body: `{"error":{"code":"x9","message":"余额不足"}}`}, Exhausted, 0},
		{"resets_in_seconds is the wait", Observation{Vendor: "other", Phase: PhaseResponse, Status: 429,
			Body: `{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","resets_in_seconds":120}}`}, Throttled, 120},
	} {
		v := Classify(tt.o)
		require.Equal(t, tt.want, v.Class, tt.name)
		require.Equal(t, DecidedBySignal, v.DecidedBy, tt.name)
		require.True(t, v.NeedsRule(), tt.name)
		if tt.wait > 0 {
			require.NotNil(t, v.RetryAfterS, tt.name)
			require.InDelta(t, tt.wait, *v.RetryAfterS, 0.001, tt.name)
		}
	}
}

// TestNeedsRule: the unknown-error alert fires for what no vendor rule
// knows, not for vendor rules, phases or successes.
func TestNeedsRule(t *testing.T) {
	t.Parallel()
	v := Classify(Observation{Vendor: "openai", Phase: PhaseResponse, Status: 400,
		Body: `{"error":{"message":"Unrecognized request argument supplied: foo","type":"invalid_request_error","param":null,"code":null}}`})
	require.Equal(t, Rejected, v.Class)
	require.True(t, v.Known, "known stays as it was")
	require.Equal(t, DecidedByStatus, v.DecidedBy)
	require.True(t, v.NeedsRule(), "an unseen 400 invalid_request_error raises the alert")

	v = Classify(Observation{Vendor: "openai", Phase: PhaseResponse, Status: 429,
		Body: `{"error":{"message":"x","type":"insufficient_quota","code":"insufficient_quota"}}`})
	require.Equal(t, DecidedByVendorRule, v.DecidedBy)
	require.False(t, v.NeedsRule())
	require.False(t, Classify(Observation{Phase: PhaseNotSent}).NeedsRule())
	require.False(t, Classify(Observation{Vendor: "openai", Phase: PhaseResponse, Status: 200, Body: `{"id":"x"}`}).NeedsRule())
}

// TestAzureSuccessWithFilterResultsIsOK: every Azure success carries
// content_filter_results; only a choice that ended with finish_reason
// content_filter and no content is a policy block.
func TestAzureSuccessWithFilterResultsIsOK(t *testing.T) {
	t.Parallel()
	ok := `{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"hi","role":"assistant"},"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}`
	require.Equal(t, OK, Classify(Observation{Vendor: "azure-openai", Phase: PhaseResponse, Status: 200, Body: ok}).Class)
	partial := `{"choices":[{"finish_reason":"content_filter","index":0,"message":{"content":"partial answer","role":"assistant"}}]}`
	require.Equal(t, OK, Classify(Observation{Vendor: "azure-openai", Phase: PhaseResponse, Status: 200, Body: partial}).Class,
		"content was delivered: the answer stands")
}

// TestCodeMsgError pins the 2xx shape read as a business error: a numeric
// code other than 0 and 200 beside a msg, and no payload member.
func TestCodeMsgError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body string
		code string
		ok   bool
	}{
		{`{"code":336501,"msg":"Rate limit reached for RPM"}`, "336501", true},
		{`{"error_code":18,"error_msg":"Open api qps request limit reached"}`, "18", true},
		{`{"code":200,"msg":"success","data":{"text":"hi"}}`, "", false},
		{`{"code":0,"msg":"ok"}`, "", false},
		{`{"code":1001,"msg":"done","data":{"text":"hi"}}`, "", false},
		{`{"code":1001,"msg":"done","choices":[{"message":{"content":"hi"}}]}`, "", false},
		{`{"code":"1001","msg":"a string code"}`, "", false},
		{`{"msg":"no code"}`, "", false},
		{`[{"code":1,"msg":"an array"}]`, "", false},
	}
	for _, tt := range tests {
		code, ok := codeMsgError(tt.body)
		require.Equal(t, tt.ok, ok, tt.body)
		require.Equal(t, tt.code, code, tt.body)
	}
	// A success body of that style stays a success.
	v := Classify(Observation{Vendor: "other", Phase: PhaseResponse, Status: 200, Body: `{"code":200,"msg":"success","data":{"answer":"hi"}}`})
	require.Equal(t, OK, v.Class)
}

// TestModelWordingsAnchored checks that every sigModel wording of the
// lexicon holds one of modelAnchors, so that modelSignal can find it.
func TestModelWordingsAnchored(t *testing.T) {
	t.Parallel()
	for _, e := range lexicon {
		if e.sig != sigModel {
			continue
		}
		found := false
		for _, a := range modelAnchors {
			found = found || strings.Contains(e.phrase, a)
		}
		require.True(t, found, "%q holds none of modelAnchors", e.phrase)
	}
}
