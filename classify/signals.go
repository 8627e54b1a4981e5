package classify

import (
	"strings"

	"github.com/tidwall/gjson"
)

// The signal layer reads any vendor. It runs under the vendor tables: when no
// vendor row matched (and before the status table), or when the row that
// matched is a weak one (a pacing or server answer read from a field every
// OpenAI-compatible server shares, see rule.weak) and the signals name a
// terminal condition. It walks any JSON error shape (nested error objects,
// arrays, base_resp, details, problem+json, an upstream body carried as a
// string inside a gateway's), lower-cases every string it finds, and looks
// the lexicon up in it. The lexicon is the one table below; every entry
// names the real body it was read from (a file in testdata/), and
// TestLexiconPinned checks the body holds the phrase.

// signal is one normalised fact a body states about itself.
type signal uint16

const (
	sigMoney        signal = 1 << iota // balance, credits, arrears, spend cap
	sigCredential                      // the key or token is invalid
	sigVerification                    // the account or organisation must be verified
	sigAccount                         // the account is suspended, locked or not active
	sigPlan                            // the plan or tier does not include this
	sigModel                           // the model cannot be loaded or served
	sigPolicy                          // content policy, safety or inspection filter
	sigContext                         // the input is over a stated context or size limit
	sigLongWindow                      // a quota window of an hour or more
	sigShortWindow                     // a quota window of a second or a minute
	sigQuota                           // a quota or usage limit, window not stated
	sigRate                            // rate limit, throttling, concurrency
	sigCapacity                        // the server or model is overloaded
	sigInFlight                        // refused for the calls this key has in flight (a concurrency limit or an in-flight spend budget)
)

// lexEntry is one lexicon row: a lower-case phrase, the signal it states,
// and the testdata file holding the vendor's exact body it was read from.
type lexEntry struct {
	phrase string
	sig    signal
	source string
}

// lexicon is the one table of signal wordings, English and Chinese. Phrases
// are matched as lower-case substrings of every string in the body. Keep
// them specific: a phrase that also occurs in a pacing message (Groq's "Need
// more tokens? Upgrade to Dev Tier") must not state money or a plan.
var lexicon = []lexEntry{
	// Money or balance.
	{"insufficient balance", sigMoney, "corpus21/001_other_429.json"},
	{"insufficient_balance", sigMoney, "corpus21/001_other_429.json"},
	{"please recharge", sigMoney, "corpus21/012_other_429.json"},
	{"余额不足", sigMoney, "corpus21/013_other_429.json"},
	{"请充值", sigMoney, "corpus21/013_other_429.json"},
	{"paid balance is insufficient", sigMoney, "corpus21/015_other_403.json"},
	{"please top up", sigMoney, "corpus21/015_other_403.json"},
	{"free quota has been exhausted", sigMoney, "corpus21/016_other_403.json"},
	{"complete your payment information", sigMoney, "corpus21/016_other_403.json"},
	{"check your plan and billing", sigMoney, "corpus21/017_other_429.json"},
	{"exceeded current quota", sigMoney, "corpus21/011_other_403.json"},
	{"requires more credits", sigMoney, "corpus21/026_openrouter_402.json"},
	{"more credits are required", sigMoney, "corpus21/028_openrouter_402.json"},
	{"used all available credits", sigMoney, "corpus21/059_xai_429.json"},
	{"spending limit", sigMoney, "corpus21/059_xai_429.json"},
	{"api usage limits", sigMoney, "corpus21/042_litellm-proxy_400.json"},
	{"regain access on", sigMoney, "corpus21/042_litellm-proxy_400.json"},
	{"not-enough-credits", sigMoney, "corpus21/069_other_402.json"},
	{"included credits", sigMoney, "corpus21/071_other_402.json"},
	{"insufficient account funds", sigMoney, "corpus21b/058_other_402.json"},
	{"overdue balance", sigMoney, "corpus21e/027_other_403.json"},
	{"balance is overdue", sigMoney, "corpus21e/032_other_403.json"},
	// Alibaba Model Studio's Arrearage message, also relayed without its
	// code ("Access denied, please make sure your account is in good
	// standing."), and the overdue-account wording of another relay.
	{"account is in good standing", sigMoney, "corpus21f/008_other_400.json"},
	{"overdue account", sigMoney, "corpus21f/007_other_403.json"},
	// Tencent CloudBase AI's token grant used up (EXCEED_TOKEN_QUOTA_LIMIT):
	// an allowance, not a rate.
	{"token usage exceeded", sigMoney, "corpus21h/029_other_429.json"},
	// DashScope's free allocation of a model used up (a Coding Plan's
	// "hour/week/month allocated quota exceeded" differ: a window).
	{"free allocated quota", sigMoney, "corpus21f/010_other_429.json"},
	// A subscription whose payment is past due (Ollama Cloud's 403, relayed
	// inside a router's 502), and a relay's documented 402 for a key out of
	// credits that also says "usage limit" (money before pace).
	{"past due", sigMoney, "corpus21i/020_other_502.json"},
	{"insufficient credits", sigMoney, "corpus21i/056_other_402.json"},
	// Credential.
	{"invalid api key", sigCredential, "corpus21/031_other_200.json"},
	{"authentication credentials", sigCredential, "corpus21/033_vertex_401.json"},
	{"api key not valid", sigCredential, "corpus21b/045_other_400.json"},
	{"api key not found", sigCredential, "corpus21f/037_gemini_400.json"},
	// A proxy whose own upstream key is not configured (FastAPI's 503
	// "NVIDIA_NIM_API_KEY is not set"): every call fails the same way.
	{"api_key is not set", sigCredential, "corpus21g/034_other_503.json"},
	// A credential restricted to another product (Anthropic's Claude Code
	// OAuth credential used for other API requests, relayed by proxies).
	{"only authorized for use with", sigCredential, "corpus21g/037_anthropic_400.json"},
	// Credentials refused by the provider behind a gateway (its 502 "the
	// provider rejected the gateway's credentials"): every call fails the
	// same way.
	{"rejected the gateway's credentials", sigCredential, "corpus21i/005_other_502.json"},
	// Verification.
	{"must be verified", sigVerification, "openai/organization_must_be_verified_400.json"},
	// Account state.
	{"is not active", sigAccount, "corpus21/011_other_403.json"},
	{"is suspended", sigAccount, "corpus21/068_other_412.json"},
	{"has been locked", sigAccount, "corpus21d/011_other_429.json"},
	{"currently inactive", sigAccount, "corpus21d/042_other_429.json"},
	{"fair usage policy", sigAccount, "corpus21e/025_other_429.json"},
	{"service unavailable for account", sigAccount, "corpus21e/008_other_403.json"},
	{"has not agreed to", sigAccount, "corpus21e/010_other_403.json"},
	// Moonshot's Kimi Code plan, terminated for the account.
	{"access terminated", sigAccount, "corpus21f/035_other_403.json"},
	// Plan or tier.
	{"upgrade to continue", sigPlan, "corpus21/041_ollama_429.json"},
	{"not included in current subscription plan", sigPlan, "corpus21e/038_other_404.json"},
	// A model this account, plan or server cannot serve (docs/classifier.md,
	// "Model not found: one rule for every vendor"): not loaded or not
	// loadable on a self-hosted server, not on the account's plan, an id the
	// API does not know. These wordings are also read from the message right
	// after the model table, before any vendor row, for every vendor
	// (modelSignal): a 400 worded as a request error, a 429 or a 503 that
	// says the model cannot be served fails every record the same way.
	{"requires more system memory", sigModel, "corpus21/022_ollama_500.json"},
	// Ollama's 500 for a pulled model the server cannot load.
	{"unable to load model", sigModel, "signal/model_unable_to_load_ollama_500.json"},
	// Featherless AI's documented 400 for a model that is not loaded.
	{"not ready for inference", sigModel, "corpus21h/033_other_400.json"},
	// Ids the API does not know or the account cannot use: the Cursor
	// agents API, SiliconFlow's 20012, Cloudflare Workers AI's 5007 and 3042,
	// Venice's INVALID_MODEL, the GitHub Models API's unknown_model, Kiro's
	// INVALID_MODEL_ID, the AiHubMix relay's 503, Gemini Code Assist's 400.
	{"is not available or invalid", sigModel, "corpus21h/002_other_400.json"},
	{"model does not exist", sigModel, "corpus21h/009_other_400.json"},
	{"no such model", sigModel, "corpus21h/024_other_400.json"},
	{"the model name is invalid", sigModel, "corpus21h/025_other_404.json"},
	{"invalid model specified", sigModel, "corpus21h/042_other_400.json"},
	{"unknown model", sigModel, "corpus21h/053_other_400.json"},
	{"invalid model. please select", sigModel, "signal/model_invalid_model_kiro_400.json"},
	{"incorrect model id", sigModel, "signal/model_incorrect_model_id_aihubmix_503.json"},
	{"don't have access to this model", sigModel, "corpus21h/059_other_400.json"},
	{"model disabled", sigModel, "corpus21h/005_other_403.json"},
	// An Azure deployment that does not serve the operation for its model
	// (OperationNotSupported): every call to that deployment fails alike.
	{"does not work with the specified model", sigModel, "corpus21h/056_azure-openai_400.json"},
	// Z.ai's 1211 in Chinese: "the model does not exist, check the model code".
	{"模型不存在", sigModel, "zhipu/model_unavailable_1211_anthropic_400.json"},
	// A self-hosted server that cannot load the model (LM Studio's 400).
	{"failed to load model", sigModel, "corpus21g/024_other_400.json"},
	{"无可用渠道", sigModel, "corpus21b/062_other_503.json"},
	{"permitted models can be found", sigModel, "corpus21b/074_other_400.json"},
	{"not allowed to access this model", sigModel, "corpus21e/009_other_403.json"},
	{"has not activated the model", sigModel, "corpus21e/031_other_404.json"},
	// Content policy.
	{"inappropriate content", sigPolicy, "corpus21/029_other_400.json"},
	{"data_inspection_failed", sigPolicy, "corpus21/029_other_400.json"},
	{"content management policy", sigPolicy, "corpus21/056_other_400.json"},
	{"content_filter", sigPolicy, "corpus21/056_other_400.json"},
	{"is sensitive", sigPolicy, "corpus21/074_other_500.json"},
	// ZenMux's documented 403 type for a request an upstream safety policy
	// blocked: the content, not the key.
	{"safety_check_failed", sigPolicy, "signal/safety_check_failed_zenmux_403.json"},
	// Context or size.
	{"context size", sigContext, "corpus21/019_other_500.json"},
	{"exceed_context_size", sigContext, "corpus21/018_other_500.json"},
	{"exceeds the model limit", sigContext, "corpus21/045_bedrock_400.json"},
	// Quota windows.
	{"per day", sigLongWindow, "corpus21/034_groq_429.json"},
	{"小时的使用上限", sigLongWindow, "corpus21/039_other_429.json"},
	{"monthly", sigLongWindow, "corpus21/071_other_402.json"},
	{"per-day", sigLongWindow, "corpus21b/001_other_429.json"},
	{"weekly", sigLongWindow, "corpus21b/042_other_403.json"},
	{"7-day", sigLongWindow, "corpus21b/042_other_403.json"},
	{"5-hour", sigLongWindow, "corpus21b/040_other_429.json"},
	{"session usage limit", sigLongWindow, "corpus21b/032_ollama_429.json"},
	{"tpd rate limit", sigLongWindow, "signal/quota_window_tpd_moonshot_429.json"},
	{"limit_rpd", sigLongWindow, "openrouter/limit_rpd_429.json"},
	// SiliconFlow's requests-per-hour limit: a window of an hour.
	{"rph limit", sigLongWindow, "corpus21f/002_other_429.json"},
	{"billing cycle", sigLongWindow, "corpus21c/100_other_403.json"},
	// Kimi Code and Codex say "You've reached your usage limit" only for a
	// plan window (five hours, a week, a billing cycle), never for pacing.
	{"reached your usage limit", sigLongWindow, "corpus21c/100_other_403.json"},
	{"daily", sigLongWindow, "corpus21c/104_other_429.json"},
	{"per minute", sigShortWindow, "corpus21/025_other_429.json"},
	{"per_minute", sigShortWindow, "corpus21/032_vertex_429.json"},
	{"1 minute", sigShortWindow, "corpus21/043_other_429.json"},
	{"tpm rate limit", sigShortWindow, "corpus21/008_other_429.json"},
	{"tpm limit", sigShortWindow, "corpus21/051_other_429.json"},
	{"usage limit", sigQuota, "corpus21/007_openai_429.json"},
	{"check quota", sigQuota, "corpus21/005_other_429.json"},
	// Rate, throttling, concurrency.
	{"rate limit", sigRate, "corpus21/063_other_429.json"},
	{"ratelimit", sigRate, "corpus21/043_other_429.json"},
	{"throttling threshold", sigRate, "corpus21/043_other_429.json"},
	{"too many requests", sigRate, "corpus21/025_other_429.json"},
	{"速率限制", sigRate, "corpus21/072_other_429.json"},
	// Capacity or overload.
	{"no capacity available", sigCapacity, "corpus21/049_gemini_429.json"},
	{"capacity exceeded", sigCapacity, "mistral/service_tier_capacity_503.json"},
	{"resource limitations", sigCapacity, "corpus21/024_ollama_500.json"},
	{"访问量过大", sigCapacity, "zhipu/overloaded_1305_429.json"},
	{"currently overloaded", sigCapacity, "corpus21c/101_other_429.json"},
	{"engine_overloaded", sigCapacity, "corpus21c/101_other_429.json"},
	{"server_is_overloaded", sigCapacity, "corpus21c/102_openai_200.json"},
	// Cloudflare Workers AI's 3040 "Out of capacity" (a 429 that is the
	// vendor's capacity, not the key's pace).
	{"no more data centers", sigCapacity, "corpus21h/027_other_429.json"},
	// Refused for the calls already in flight (OpenRouter's documented 402
	// in_flight_budget_exhausted, "given your current in-flight requests.
	// Retry after in-flight requests settle"): it clears when they finish,
	// whatever the status and whatever else the body says about credits.
	{"in-flight requests", sigInFlight, "openrouter/in_flight_budget_402.json"},
	// A concurrency limit is the same refusal: it clears when the calls in
	// flight finish, whatever the status (Kimi Code's 403 permission_error
	// "You've reached your concurrent request limit") and whatever else the
	// body says about money or the plan.
	{"concurrency", sigInFlight, "corpus21/040_other_429.json"},
	{"concurrent request", sigInFlight, "signal/in_flight_concurrent_request_kimi_403.json"},
	{"并发", sigInFlight, "corpus21/073_other_429.json"},
}

// modelAnchors are the words modelSignal looks a model wording up by, each
// without its first letter so that a capitalised word ("Model", "Invalid")
// still matches: every sigModel wording holds one (TestModelWordingsAnchored).
var modelAnchors = []string{"odel", "模型", "nference", "emory", "nvalid", "渠道"}

// anchoredPhrase is a sigModel wording and where its anchor stands in it.
type anchoredPhrase struct {
	phrase string
	at     int // the anchor's offset in phrase
}

// modelAnchored lists, per anchor of modelAnchors, the wordings that hold it.
var modelAnchored = func() [][]anchoredPhrase {
	anchored := make([][]anchoredPhrase, len(modelAnchors))
	for _, e := range lexicon {
		if e.sig != sigModel {
			continue
		}
		for i, a := range modelAnchors {
			if at := strings.Index(e.phrase, a); at >= 0 {
				anchored[i] = append(anchored[i], anchoredPhrase{e.phrase, at})
				break
			}
		}
	}
	return anchored
}()

// modelScan bounds the part of a message modelSignal reads.
const modelScan = 1024

// modelSignal is the signal layer's answer for a message that says the
// model cannot be served, read right after the model table and before any
// vendor, request or status row (runChain): such a body is often worded as
// a request error (a 400 invalid_request_error), a rate limit (a 429) or a
// server error (a 500 or 503), and every one of those rows would resend or
// dead-letter a batch whose every record fails the same way. It runs on
// every error that reaches the request table, so it reads the raw message
// (the JSON literal, or a plain-text body) without decoding or lowering it:
// it finds each anchor word and compares the wordings that hold it there,
// case-folded. No allocation. A wording in capitals throughout, or whose
// non-ASCII letters the body escapes (\uXXXX), is left to the signal layer
// below.
func modelSignal(f *facts) (Verdict, bool) {
	raw := f.msg
	if raw == "" {
		raw = f.text
	}
	if len(raw) > modelScan {
		raw = raw[:modelScan]
	}
	for i, a := range modelAnchors {
		for from := 0; ; {
			k := strings.Index(raw[from:], a)
			if k < 0 {
				break
			}
			pos := from + k
			for _, ap := range modelAnchored[i] {
				if s := pos - ap.at; s >= 0 && s+len(ap.phrase) <= len(raw) && strings.EqualFold(raw[s:s+len(ap.phrase)], ap.phrase) {
					return modelUnavailableVerdict, true
				}
			}
			from = pos + len(a)
		}
	}
	// The pattern (modelpattern.go): the model as subject and an
	// unavailability word near it, not a request capability it lacks. A
	// 401, 403 or 404 holds the key already, whichever row decides it (a
	// vendor's own row keeps its reason and stays known), so the pattern is
	// read where a row would otherwise reject, pace or resend.
	if f.status != 401 && f.status != 403 && f.status != 404 && modelUnservable(raw) {
		return modelUnavailableVerdict, true
	}
	return Verdict{}, false
}

// modelUnavailableVerdict is modelSignal's answer.
var modelUnavailableVerdict = Verdict{Class: Exhausted, Reason: "signal_model_unavailable", Known: true, Rule: signalPrefix + "model_unavailable", DecidedBy: DecidedBySignal}

// hintKeys are members that state a wait in seconds, wherever they sit:
// ChatGPT's usage_limit_reached error.resets_in_seconds.
var hintKeys = []string{"resets_in_seconds"}

// bodySignals is what the signal layer read from a body.
type bodySignals struct {
	sigs signal
	hint *float64 // a wait stated in a member of hintKeys
}

// readSignals walks a JSON body (an SSE stream's data lines each count as
// one) and returns its signals. A body that is not JSON states nothing.
func readSignals(body string) bodySignals {
	var out bodySignals
	text := collectText(body, &out)
	for i := range lexicon {
		if out.sigs&lexicon[i].sig == 0 && strings.Contains(text, lexicon[i].phrase) {
			out.sigs |= lexicon[i].sig
		}
	}
	if out.sigs&sigModel == 0 && heldLower(text) {
		out.sigs |= sigModel
	}
	return out
}

// bodyText is the lower-cased text the lexicon is looked up in.
func bodyText(body string) string {
	var out bodySignals
	return collectText(body, &out)
}

func collectText(body string, out *bodySignals) string {
	var b strings.Builder
	collect := func(s string) {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	body = strings.TrimSpace(body)
	switch {
	case body == "":
	case body[0] == '{' || body[0] == '[' || body[0] == '"':
		if gjson.Valid(body) {
			walkJSON(gjson.Parse(body), 0, collect, out)
		}
	case body[0] == '<': // an HTML error page states nothing
	default:
		json := false
		for line := range strings.Lines(body) {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "data:"))
			if strings.HasPrefix(line, "{") && gjson.Valid(line) {
				walkJSON(gjson.Parse(line), 0, collect, out)
				json = true
			}
		}
		if !json {
			// A plain-text error (LM Studio's "Failed to load model …"):
			// its text, as parseBody keeps it.
			collect(cutText(body))
		}
	}
	return strings.ToLower(b.String())
}

// walkJSON collects every string value (and the strings inside a JSON
// document carried as a string, as gateways do with the upstream body) and
// the numeric hints.
func walkJSON(v gjson.Result, depth int, collect func(string), out *bodySignals) {
	if depth > 32 {
		return
	}
	switch {
	case v.IsObject() || v.IsArray():
		v.ForEach(func(k, e gjson.Result) bool {
			if k.Type == gjson.String && e.Type == gjson.Number {
				for _, h := range hintKeys {
					if k.Str == h && e.Num >= 0 && out.hint == nil {
						out.hint = ptr(e.Num)
					}
				}
			}
			walkJSON(e, depth+1, collect, out)
			return true
		})
	case v.Type == gjson.String:
		collect(v.Str)
		if s := strings.TrimSpace(v.Str); depth < 8 && strings.HasPrefix(s, "{") && gjson.Valid(s) {
			walkJSON(gjson.Parse(s), depth+1, collect, out)
		}
	}
}

// signalVerdict turns signals into a class, in this order: a refusal for
// the calls in flight first (throttled: it clears when they settle, even
// when the body also names credits), then account and
// money (money; then credential, verification, account state and plan,
// all reason "account"), then
// a model that cannot load, then the request (content policy, then a stated
// context or size limit), then quota windows (an hour or more is
// exhausted), then pacing (a short window, a quota with no window stated, a
// rate limit: throttled), then capacity (transient). No signal: no verdict,
// and the status table decides.
func signalVerdict(s signal) (Class, string, bool) {
	switch {
	case s&sigInFlight != 0:
		return Throttled, "in_flight", true
	case s&sigMoney != 0:
		return Exhausted, "money", true
	case s&(sigCredential|sigVerification|sigAccount|sigPlan) != 0:
		return Exhausted, "account", true
	case s&sigModel != 0:
		return Exhausted, "model_unavailable", true
	case s&sigPolicy != 0:
		return Rejected, "content_policy", true
	case s&sigContext != 0:
		return Rejected, "context_or_size", true
	case s&sigLongWindow != 0:
		return Exhausted, "quota_window", true
	case s&(sigShortWindow|sigQuota|sigRate) != 0:
		return Throttled, "rate_limit", true
	case s&sigCapacity != 0:
		return Transient, "capacity", true
	}
	return 0, "", false
}

// signalReasons lists every reason signalVerdict can give, for the rule IDs
// ("signal/money", …) and their fixtures.
var signalReasons = []string{"in_flight", "money", "account", "model_unavailable",
	"content_policy", "context_or_size", "quota_window", "rate_limit", "capacity"}

const signalPrefix = "signal/"

// decideSignals is the signal layer's verdict for f's body, if it states
// anything.
func decideSignals(f *facts, body string) (Verdict, bool) {
	bs := readSignals(body)
	c, reason, ok := signalVerdict(bs.sigs)
	if !ok {
		return Verdict{}, false
	}
	if bs.hint != nil && f.hint == nil {
		f.hint = bs.hint
	}
	return Verdict{Class: c, Reason: "signal_" + reason, Known: true, Rule: signalPrefix + reason, DecidedBy: DecidedBySignal}, true
}

// classifyOtherErrorIn2xx reads the 2xx error shapes parseBody does not
// know: an OpenAI-compatible API's base_resp with a non-zero status_code
// (MiniMax), a completion whose choice ended with finish_reason
// content_filter and no content (Azure), and a body that is only a numeric
// business code and a msg (Baidu Qianfan, codeMsgError). The signal layer
// decides; a
// terminal or pacing answer stands, anything else is ambiguous, as for any
// error inside a 2xx body.
func (c *Classifier) classifyOtherErrorIn2xx(f *facts, o Observation, tr *tracer) (Verdict, bool) {
	body := o.Body
	switch {
	case strings.Contains(body, "base_resp"):
		sc := gjson.Get(body, "base_resp.status_code")
		if sc.Type != gjson.Number || sc.Num == 0 {
			return Verdict{}, false
		}
		f.code, f.baseResp = sc.Raw, sc.Raw
		f.hasError = true
		// MiniMax's documented code table decides first; a server code
		// (1000, 1024, 1033) is transient, as the docs say to retry: no
		// output was produced.
		for i := range minimaxTable.rules {
			r := &minimaxTable.rules[i]
			if r.when(f) {
				tr.fire(r.id)
				if tr != nil {
					tr.errorIn2xx = true
				}
				return finish(Verdict{Class: r.class, Reason: r.reason, Known: true, Rule: r.id, DecidedBy: DecidedByVendorRule}, f, o), true
			}
		}
	case strings.Contains(body, `"Response"`) && gjson.Get(body, "Response.Error.Code").Type == gjson.String:
		// TencentCloud API 3.0 (Hunyuan and every Tencent Cloud API)
		// answers HTTP 200 with {"Response":{"Error":{"Code","Message"},
		// "RequestId"}} (www.tencentcloud.com/document/api/1284/75543).
		e := gjson.Get(body, "Response.Error")
		f.code, f.msg = e.Get("Code").Str, e.Get("Message").Raw
		f.hasError = true
		for i := range tencentcloudTable.rules {
			r := &tencentcloudTable.rules[i]
			if r.when(f) {
				tr.fire(r.id)
				if tr != nil {
					tr.errorIn2xx = true
				}
				return finish(Verdict{Class: r.class, Reason: r.reason, Known: true, Rule: r.id, DecidedBy: DecidedByVendorRule}, f, o), true
			}
		}
	case strings.Contains(body, "content_filter") && gjson.Get(body, "object").Str == "response":
		// OpenAI Responses API: status "incomplete" with
		// incomplete_details.reason content_filter and no output text.
		if gjson.Get(body, "incomplete_details.reason").Str != "content_filter" || responseText(body) != "" {
			return Verdict{}, false
		}
		f.code = "content_filter"
	case strings.Contains(body, "content_filter"):
		filtered := false
		gjson.Get(body, "choices").ForEach(func(_, ch gjson.Result) bool {
			if ch.Get("finish_reason").Str == "content_filter" && ch.Get("message.content").Str == "" {
				filtered = true
			}
			return !filtered
		})
		if !filtered {
			return Verdict{}, false
		}
		f.code = "content_filter"
	case strings.Contains(body, "msg"):
		code, ok := codeMsgError(body)
		if !ok {
			return Verdict{}, false
		}
		f.code = code
	default:
		return Verdict{}, false
	}
	f.hasError = true
	if v, ok := decideSignals(f, body); ok {
		switch v.Class {
		case Exhausted, Rejected, Throttled:
			tr.fire(v.Rule)
			if tr != nil {
				tr.errorIn2xx = true
			}
			return finish(v, f, o), true
		}
	}
	tr.fire(idErrorIn2xx)
	return Verdict{Class: Ambiguous, Code: strPtr(f.defaultCode()), Reason: "error_in_2xx_body", Known: true, Rule: idErrorIn2xx, DecidedBy: DecidedByStatus}, true
}

// codeMsgError reports a 2xx body that is nothing but a business error, and
// returns its code: a non-zero numeric code other than 200 beside a message
// string, and no payload member. Baidu Qianfan documents its RPM and TPM
// limits as HTTP 200 with {"code":336501,"msg":"Rate limit reached for RPM"}
// (its older APIs say error_code and error_msg). A success body of that
// style ({"code":200,"msg":"success","data":…}) is not one.
func codeMsgError(body string) (string, bool) {
	if !gjson.Valid(body) {
		return "", false
	}
	r := gjson.Parse(body)
	if !r.IsObject() {
		return "", false
	}
	code, msg := r.Get("code"), r.Get("msg")
	if !code.Exists() && !msg.Exists() {
		code, msg = r.Get("error_code"), r.Get("error_msg")
	}
	if code.Type != gjson.Number || code.Num == 0 || code.Num == 200 || msg.Type != gjson.String {
		return "", false
	}
	for _, k := range []string{"choices", "data", "result", "output", "candidates", "message", "content"} {
		if v := r.Get(k); v.Exists() && v.Type != gjson.Null {
			return "", false
		}
	}
	return code.Raw, true
}

// onlyErrorEvents reports whether every JSON event of a stream is an error
// event ({"type":"error",…}): the server refused the request before it
// started anything (an OpenAI-compatible Responses stream without
// sequence_number). A stream that also carries any other event (Anthropic's
// message_start) is not one.
func onlyErrorEvents(body string) bool {
	n := 0
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "data:"))
		if !strings.HasPrefix(line, "{") {
			continue
		}
		if !gjson.Valid(line) || gjson.Get(line, "type").Str != "error" {
			return false
		}
		n++
	}
	return n > 0
}

// classifyStreamError reads an OpenAI Responses-API failure: a stream
// that ends with an error event or response.failed (a rate limit, a quota,
// a server error), or a response object whose status is "failed" (a
// background response polled to its end). The provider states that the
// response failed and, in response.failed, what it used (the client reads
// the usage; what a stream generated before a bare error event is
// estimated from the text received), so the call's outcome is known, not
// ambiguous, whether or not output came first: the error is read with the
// tables and the signal layer like an error in a 2xx body, and a terminal,
// pacing or server answer (server_error, server_is_overloaded) stands; an
// event that states only an overload (capacity) is transient. A failure
// the tables do not know stays ambiguous.
func (c *Classifier) classifyStreamError(o Observation, depth int, tr *tracer) (Verdict, bool) {
	event := responsesFailure(o.Vendor, o.Body)
	if event == "" {
		return Verdict{}, false
	}
	var inner *tracer
	if tr != nil {
		inner = &tracer{}
	}
	v := c.classify(Observation{Vendor: o.Vendor, Path: o.Path, Phase: PhaseResponse, Status: 200, Headers: o.Headers, Body: event}, depth, inner)
	switch v.Class {
	case Exhausted, Rejected, Throttled:
	default:
		// A server answer (server_error, server_is_overloaded): the
		// vendor's row says transient, as for a 500 or 503. An event that
		// states only an overload in other words (capacity): the same.
		eo := Observation{Vendor: o.Vendor, Path: o.Path, Phase: PhaseResponse, Status: 200, Headers: o.Headers, Body: event}
		f := facts{vendor: o.Vendor, path: o.Path, status: 200}
		f.parseBody(event)
		var rt *tracer
		if inner != nil {
			rt = &tracer{}
		}
		if tv, ok := c.decide(&f, eo, depth, rt); ok && tv.Known && tv.Class == Transient {
			v = finish(tv, &f, o)
			if inner != nil {
				inner.ids = append(inner.ids[:0], rt.ids...)
			}
			break
		}
		f = facts{}
		sv, ok := decideSignals(&f, event)
		if !ok || sv.Rule != signalPrefix+"capacity" {
			return Verdict{}, false
		}
		v = finish(sv, &f, o)
		if inner != nil {
			inner.ids = append(inner.ids[:0], sv.Rule)
		}
	}
	if tr != nil {
		tr.ids = append(tr.ids, inner.ids...)
		tr.streamError = true
	}
	if o.Phase == PhaseStream {
		v.Reason = "stream_" + v.Reason
	} else {
		v.Reason = "response_" + v.Reason
	}
	return v, true
}

// responseText is the output text of an OpenAI Responses-API response
// object.
func responseText(body string) string {
	var b strings.Builder
	gjson.Get(body, "output").ForEach(func(_, item gjson.Result) bool {
		item.Get("content").ForEach(func(_, part gjson.Result) bool {
			if part.Get("type").Str == "output_text" {
				b.WriteString(part.Get("text").Str)
			}
			return true
		})
		return true
	})
	return b.String()
}

// responsesFailure returns an OpenAI Responses-API failure as an error body
// ({"error":{…}}), or "": the last error event or the response.failed
// event of a stream (its events carry sequence_number, or it ends with
// response.failed), or a response object with status "failed". Other
// streams (an Anthropic error event after message_start, a chat
// completions error chunk) are not one.
func responsesFailure(vendor, body string) string {
	if !strings.Contains(body, "error") {
		return ""
	}
	if t := strings.TrimSpace(body); strings.HasPrefix(t, "{") {
		if gjson.Get(t, "object").Str == "response" && gjson.Get(t, "status").Str == "failed" {
			if raw := gjson.Get(t, "error"); raw.IsObject() {
				return `{"error":` + raw.Raw + `}`
			}
		}
		return ""
	}
	// Responses-API streams only: their events carry sequence_number or
	// end with response.failed, or, from a vendor other than Anthropic, the
	// stream is error events alone (an OpenAI-compatible server without
	// sequence_number). Anthropic's streams (an error event, with or
	// without message_start before it) stay ambiguous.
	if !strings.Contains(body, "sequence_number") && !strings.Contains(body, "response.failed") &&
		(vendor == "anthropic" || !onlyErrorEvents(body)) {
		return ""
	}
	event := ""
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "data:"))
		if !strings.HasPrefix(line, "{") || !gjson.Valid(line) {
			continue
		}
		switch gjson.Get(line, "type").Str {
		case "error":
			if gjson.Get(line, "error").IsObject() {
				event = line
			} else {
				// {"type":"error","code":…,"message":…}: the event is the error.
				event = `{"error":` + line + `}`
			}
		case "response.failed":
			if raw := gjson.Get(line, "response.error"); raw.IsObject() && event == "" {
				event = `{"error":` + raw.Raw + `}`
			}
		}
	}
	return event
}
