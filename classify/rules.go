package classify

import (
	"slices"
	"strings"
)

// rule is one row of a vendor table: when it matches, the Verdict gets its
// class and reason. Rows are tried top to bottom; the first match wins.
type rule struct {
	id     string // "table/reason", set by newTable
	reason string
	class  Class
	when   func(f *facts) bool
	// unknown marks a row that is a deliberate fallback (known:false).
	unknown bool
	// weak marks a pacing or server row read from a field every
	// OpenAI-compatible server shares (code rate_limit_exceeded, type
	// server_error): when the body's signals name a terminal condition
	// (money, account, a model that cannot load, content policy, a stated
	// size limit, a window of an hour or more), the signal layer overrules
	// it. A llama.cpp "Context size has been exceeded." sent as a 500
	// server_error is rejected, not retried.
	weak bool
	// delegate marks the OpenRouter row that classifies the upstream body
	// (error.metadata.raw) with the upstream vendor's own tables.
	delegate bool
	// wrapped marks the row that classifies an upstream body a gateway
	// carries as its error.message string, with the same vendor's tables.
	wrapped bool
}

type table struct {
	name  string
	rules []rule
}

// newTable names a table and gives each row its ID, "table/reason".
func newTable(name string, rules []rule) *table {
	for i := range rules {
		rules[i].id = name + "/" + rules[i].reason
	}
	return &table{name: name, rules: rules}
}

func codeIn(f *facts, set ...string) bool { return slices.Contains(set, f.code) }
func typeIn(f *facts, set ...string) bool { return slices.Contains(set, f.typ) }

// textWaitAtLeast reports whether the message states a wait of at least min
// seconds.
func textWaitAtLeast(f *facts, min float64) bool {
	s, ok := textWait(f.lower())
	return ok && s >= min
}

// limitZeroInMessage finds Google's "limit: 0" followed by "," or an
// escaped newline in the raw message literal, in one scan.
func limitZeroInMessage(raw string) bool {
	for {
		i := strings.Index(raw, "limit: 0")
		if i < 0 {
			return false
		}
		raw = raw[i+len("limit: 0"):]
		if strings.HasPrefix(raw, ",") || strings.HasPrefix(raw, `\n`) {
			return true
		}
	}
}

// says is the narrow message-text backup: lower-case substring match.
func says(f *facts, subs ...string) bool {
	lmsg := f.lower()
	for _, s := range subs {
		if strings.Contains(lmsg, s) {
			return true
		}
	}
	return false
}

// modelTable is the one model-not-found rule, run first for every vendor: a
// model (or deployment, or endpoint) the key cannot reach fails every record
// of the pipeline the same way, so the key holds (exhausted, one alert, the
// probe resumes it once the model exists) rather than the whole batch being
// dead-lettered one call at a time. Structured codes first: OpenAI and
// OpenAI-compatible model_not_found, Groq model_decommissioned, Together
// model_not_available and dedicated_endpoint_not_running, Azure
// DeploymentNotFound, vLLM NotFoundError, Anthropic not_found_error, Google
// NOT_FOUND, Bedrock ResourceNotFoundException; then any 404 (the resource
// is the model or the endpoint, never the prompt); then the words of the
// vendors that send a model error as a 400 (DeepSeek "Model Not Exist",
// Bedrock "The provided model identifier is invalid") or in a body with no
// code (Ollama "model '…' not found", pollinations "Model not found", the
// LiteLLM proxy's 400 "Invalid model name passed in model=…", Mistral's 400
// "Invalid model: …").
var modelTable = newTable("model", []rule{
	{reason: "model_unavailable", class: Exhausted, when: func(f *facts) bool {
		return codeIn(f, "model_not_found", "model_decommissioned", "model_not_available", "dedicated_endpoint_not_running",
			"DeploymentNotFound",
			// Volcengine Ark (www.volcengine.com/docs/82379/1299023): the
			// model or endpoint does not exist, or the account has not
			// activated the model.
			"InvalidEndpointOrModel.NotFound", "ModelNotOpen",
			// The GitHub Copilot API: a model the account's plan or
			// policies do not serve (model_not_supported,
			// no_available_model_endpoints) or do not serve through this
			// endpoint (unsupported_api_for_model, "not accessible via the
			// /chat/completions endpoint"). Every record of the pipeline
			// asks for the same model through the same endpoint, so every
			// record fails the same way: the key holds, it is not the
			// request.
			"model_not_supported", "unsupported_api_for_model", "no_available_model_endpoints",
			// The GitHub Models API: a model id it does not serve.
			"unknown_model",
			// Alibaba Model Studio (www.alibabacloud.com/help/en/model-studio/error-code):
			// the model has not been purchased for the account, a 429
			// that no wait lifts.
			"CommodityNotPurchased") ||
			f.innerCode == "DeploymentNotFound" || typeIn(f, "NotFoundError", "not_found_error") ||
			f.gstatus == "NOT_FOUND" || f.amzType == "ResourceNotFoundException" ||
			f.status == 404 && !noEndpointForRequest(f) ||
			f.status == 400 && says(f, "model not exist", "the provided model identifier is invalid", "not found, try pulling it first",
				"model not found", "invalid model name passed in", "invalid model:",
				// GitHub Copilot's 400 with no code: "The requested model is
				// not available for integrator \"vscode-chat\". Available
				// models: [...]".
				"requested model is not available",
				// Bedrock: this model id is only served through an inference
				// profile (or provisioned throughput); every call with it fails.
				"with on-demand throughput isn", "doesn't support on-demand throughput")
	}},
})

// noEndpointForRequest reports OpenRouter's 404 for a request no endpoint
// of the model can serve as asked: "No endpoints found that support tool
// use", "… that support the provided 'tool_choice' value", "… that support
// cache control", "No endpoints found that can handle the requested
// parameters." (with provider.require_parameters). The model exists; the
// request's tools, tool_choice or parameters are what no endpoint takes, so
// the same request without them goes through (openrouter.ai/docs provider
// routing: require_parameters filters out endpoints that do not support every
// parameter). "No endpoints found for <model>" and "No endpoints found
// matching your data policy" name the model or the account's settings and
// stay model_unavailable.
func noEndpointForRequest(f *facts) bool {
	return says(f, "no endpoints found that support", "no endpoints found that can handle the requested")
}

// requestTable names the rejections a changed request can get past, run
// right after the model table for every vendor, so that the worker can key
// its one changed retry on a reason that is the same whoever sent it.
//
// context_length: the input does not fit the model's context window. OpenAI
// (and every OpenAI-compatible server) says so in code
// context_length_exceeded; the others only in words: OpenAI-compatible
// servers without the code (vLLM, DeepSeek, OpenRouter) "maximum context
// length is M tokens", Anthropic "prompt is too long: N tokens > M maximum",
// "input length and `max_tokens` exceed context limit: N + K > M" and a 413
// "Request size exceeds model context window", Bedrock "Input is too long for
// requested model", Gemini "The input token count (N) exceeds the maximum
// number of tokens allowed (M)". ContextOverflow reads the counts.
//
// json_mode_refused: the endpoint refuses JSON mode (OpenAI "'response_format'
// of type 'json_object' is not supported with this model", also through
// Azure; the same for type 'json_schema', structured output), or refuses it for a prompt that does not say "json": the request
// works without response_format, so JSON mode is the droppable feature.
var requestTable = newTable("request", []rule{
	{reason: "context_length", class: Rejected, when: func(f *facts) bool {
		return codeIn(f, "context_length_exceeded") ||
			(f.status == 400 || f.status == 413) && says(f, "maximum context length is", "prompt is too long:",
				"exceed context limit", "exceeds model context window", "input is too long for requested model",
				"exceeds the maximum number of tokens allowed")
	}},
	// unsupported_by_endpoints: OpenRouter's 404 for a request no endpoint
	// of the model serves as asked (noEndpointForRequest): the tools,
	// tool_choice or a parameter are the droppable part.
	{reason: "unsupported_by_endpoints", class: Rejected, when: func(f *facts) bool {
		return f.status == 404 && noEndpointForRequest(f)
	}},
	{reason: "json_mode_refused", class: Rejected, when: func(f *facts) bool {
		return f.status == 400 && says(f, "'response_format' of type 'json_object' is not supported",
			"to use 'response_format' of type 'json_object'", "'response_format' of type 'json_schema' is not supported")
	}},
})

// openaiTable holds the OpenAI rows. They read only error.code / error.type
// values that OpenAI defined, so every OpenAI-compatible server (Groq,
// DeepSeek, vLLM, LiteLLM, gateways, unknown vendors) runs them too.
var openaiTable = newTable("openai", []rule{
	// help.openai.com 6614457 and the spend-limit docs: billing conditions share
	// type insufficient_quota and differ in code; all arrive as 429.
	{reason: "billing_quota", class: Exhausted, when: func(f *facts) bool {
		return codeIn(f, "insufficient_quota", "credit_balance_exhausted", "organization_spend_limit_exceeded",
			"project_spend_limit_exceeded", "organization_usage_limit_exceeded", "billing_hard_limit_reached",
			"billing_not_active", "access_terminated", "account_deactivated",
			// OpenAI-compatible servers with their own balance codes: Alibaba
			// DashScope "Arrearage" (a 400: "make sure your account is in good
			// standing"), Venice and relays "INSUFFICIENT_BALANCE".
			"Arrearage", "INSUFFICIENT_BALANCE",
			// Volcengine Ark: the account is in arrears (a 403 in its
			// documented code table).
			"AccountOverdueError", "OperationDenied.ServiceOverdue",
			// Alibaba Model Studio (DashScope): a prepaid or postpaid bill
			// overdue, sent as a 429 (its documented error-code table).
			"PrepaidBillOverdue", "PostpaidBillOverdue") ||
			// Moonshot (Kimi): type exceeded_current_quota_error, on a 403 or
			// a 429 ("suspended due to insufficient balance").
			typeIn(f, "insufficient_quota", "exceeded_current_quota_error")
	}},
	// 403 type request_forbidden, code unsupported_country_region_territory:
	// the key's egress region is refused. Every request from this key fails the
	// same way until the region changes, like Gemini's FAILED_PRECONDITION.
	{reason: "region_not_supported", class: Exhausted, when: func(f *facts) bool {
		return codeIn(f, "unsupported_country_region_territory")
	}},
	// 400 invalid_request_error, code unsupported_value, "Your organization
	// must be verified to stream this model": an entitlement a human grants
	// (Verify Organization), not a bad parameter. unsupported_value alone also
	// means a genuinely bad parameter, so only the message decides.
	{reason: "organization_not_verified", class: Exhausted, when: func(f *facts) bool {
		return says(f, "organization must be verified")
	}},
	// type is invalid_request_error, which alone would read as a bad request.
	{reason: "invalid_api_key", class: Exhausted, when: func(f *facts) bool { return codeIn(f, "invalid_api_key") }},
	// One request larger than the per-minute bucket (OpenAI 429, Groq 413): no
	// wait makes it fit. The code says rate_limit_exceeded; only the message
	// says which case it is.
	{reason: "request_exceeds_rate_bucket", class: Rejected, when: func(f *facts) bool {
		return codeIn(f, "rate_limit_exceeded") && says(f, "request too large")
	}},
	// Per-day buckets (Groq TPD/RPD) are named only in the message.
	{reason: "per_day_limit", class: Exhausted, when: func(f *facts) bool {
		return codeIn(f, "rate_limit_exceeded") && says(f, "per day", "(tpd)", "(rpd)")
	}},
	{reason: "rate_limit", class: Throttled, weak: true, when: func(f *facts) bool {
		return codeIn(f, "rate_limit_exceeded", "slow_down") || typeIn(f, "tokens", "requests")
	}},
	{reason: "server_error", class: Transient, weak: true, when: func(f *facts) bool {
		return typeIn(f, "server_error", "service_unavailable_error") || codeIn(f, "server_error", "server_is_overloaded")
	}},
	// The Responses API names a refused prompt in a failed response's
	// error.code (response.failed, an error event, a background response
	// polled to "failed"), with no status of its own to go on.
	{reason: "invalid_prompt", class: Rejected, when: func(f *facts) bool { return codeIn(f, "invalid_prompt") }},
})

// anthropicTable: docs.claude.com/en/api/errors error.type values, plus the
// spend conditions Anthropic reports only as 400/429 with a message.
var anthropicTable = newTable("anthropic", []rule{
	{reason: "spend_limit_enforced", class: Exhausted, when: func(f *facts) bool {
		return f.detailsErrorCode == "enforced_spend_limit_reached"
	}},
	// 400 invalid_request_error; no structured field names the condition.
	{reason: "credit_balance_too_low", class: Exhausted, when: func(f *facts) bool {
		return says(f, "credit balance is too low")
	}},
	// "You have reached your specified (workspace) API usage limits. You will
	// regain access on 2026-06-01": a spend limit set on the organisation or a
	// workspace, sent as a 400 invalid_request_error.
	{reason: "usage_limit_reached", class: Exhausted, when: func(f *facts) bool {
		return says(f, "api usage limits", "monthly spend limit", "regain access on")
	}},
	// 429 rate_limit_error "Usage credits are required for long context
	// requests" / "Extra usage is required …": the organisation has no
	// entitlement for these requests; waiting never grants it.
	{reason: "usage_credits_required", class: Exhausted, when: func(f *facts) bool {
		return says(f, "usage credits are required", "extra usage is required")
	}},
	// 400 invalid_request_error "This organization has been disabled.": the
	// account is banned or closed, so no request on this key can succeed;
	// rejected would dead-letter the whole batch one call at a time.
	{reason: "organization_disabled", class: Exhausted, when: func(f *facts) bool {
		return says(f, "organization has been disabled")
	}},
	// 401 authentication_error ("invalid x-api-key"): the key itself is
	// wrong or revoked. Its own reason, the one OpenAI's shares, so that a
	// person is told the key is invalid and no top-up will help.
	{reason: "invalid_api_key", class: Exhausted, when: func(f *facts) bool {
		return typeIn(f, "authentication_error")
	}},
	// 402 billing_error, 403 permission_error: a valid key its account
	// does not let through (payment, an organisation setting).
	{reason: "key_or_billing", class: Exhausted, when: func(f *facts) bool {
		return typeIn(f, "billing_error", "permission_error")
	}},
	// The OpenAI-compatible endpoint puts it in code: type invalid_request_error,
	// code rate_limit_error.
	{reason: "rate_limit", class: Throttled, when: func(f *facts) bool {
		return typeIn(f, "rate_limit_error") || codeIn(f, "rate_limit_error")
	}},
	// 413 request_too_large (docs.claude.com errors): the body is over the
	// endpoint's size limit; resending it unchanged cannot fit.
	{reason: "request_too_large", class: Rejected, when: func(f *facts) bool { return typeIn(f, "request_too_large") }},
	// Weak: every Anthropic-compatible server (MiniMax, Moonshot, Z.ai)
	// answers with these types whatever the cause, an api_error 500 for an
	// empty balance among them, so a terminal signal in the message
	// overrules the row.
	{reason: "overloaded", class: Transient, weak: true, when: func(f *facts) bool { return typeIn(f, "overloaded_error", "api_error") }},
})

// googleTable: Gemini (AI Studio) and Vertex AI share the google.rpc envelope.
var googleTable = newTable("google", []rule{
	// 400 INVALID_ARGUMENT, but the key is the problem.
	{reason: "api_key_invalid", class: Exhausted, when: func(f *facts) bool {
		for _, r := range f.reasons {
			if r == "API_KEY_INVALID" || r == "API_KEY_SERVICE_BLOCKED" || r == "SERVICE_DISABLED" || r == "CONSUMER_SUSPENDED" {
				return true
			}
		}
		return false
	}},
	// 403 PERMISSION_DENIED: "Your API key doesn't have the required
	// permissions" (ai.google.dev troubleshooting), including a key Google
	// blocked as leaked. No request on this key can succeed, and calling it
	// rejected would dead-letter every job one by one.
	{reason: "permission_denied", class: Exhausted, when: func(f *facts) bool { return f.gstatus == "PERMISSION_DENIED" }},
	// 400 FAILED_PRECONDITION: "Gemini API free tier is not available in your
	// country. Please enable billing on your project" (ai.google.dev
	// troubleshooting), sent as "User location is not supported for the API
	// use". An account/region condition, not the request: every request from
	// this key fails the same way until billing is enabled or the egress region
	// changes, so the key pauses and a human is alerted.
	{reason: "failed_precondition", class: Exhausted, when: func(f *facts) bool { return f.gstatus == "FAILED_PRECONDITION" }},
	// A quota whose limit is 0 (a free tier with no allowance for this model):
	// ErrorInfo metadata quota_limit_value "0", or "limit: 0" in the message
	// when the body carries no ErrorInfo. Waiting never helps, even when
	// RetryInfo says "retry in 45s".
	{reason: "quota_limit_zero", class: Exhausted, when: func(f *facts) bool {
		return f.gstatus == "RESOURCE_EXHAUSTED" && (f.limitZero || limitZeroInMessage(f.msg))
	}},
	// A per-day or per-month quota resets hours away even when RetryInfo says
	// "retry in 38s": the window is named in QuotaFailure quotaId or in
	// ErrorInfo metadata quota_limit.
	{reason: "quota_per_day", class: Exhausted, when: func(f *facts) bool {
		for _, q := range f.quotaIDs {
			if strings.Contains(q, "PerDay") || strings.Contains(q, "PerMonth") {
				return true
			}
		}
		for _, q := range f.quotaLimits {
			if strings.Contains(q, "PerDay") || strings.Contains(q, "PerMonth") {
				return true
			}
		}
		return false
	}},
	// Code Assist (cloudcode-pa) names its per-day limit only in the message
	// ("limit 'Gemini 2.5 Pro Requests per day per user per tier'"); the body
	// carries no QuotaFailure quotaId. Narrow text backup, read only when no
	// quotaId is present (a quotaId, above, decides on its own).
	{reason: "quota_per_day_message", class: Exhausted, when: func(f *facts) bool {
		return f.gstatus == "RESOURCE_EXHAUSTED" && len(f.quotaIDs) == 0 && says(f, "per day", "per month")
	}},
	// A 429 RESOURCE_EXHAUSTED whose ErrorInfo reason names a balance or
	// credits (Code Assist's INSUFFICIENT_G1_CREDITS_BALANCE): the account
	// is out of money, which no wait cures.
	{reason: "credits_balance", class: Exhausted, when: func(f *facts) bool {
		return slices.ContainsFunc(f.reasons, func(r string) bool {
			return strings.Contains(r, "BALANCE") || strings.Contains(r, "CREDITS")
		})
	}},
	// Code Assist (cloudcode-pa) 429 RESOURCE_EXHAUSTED with ErrorInfo
	// reason MODEL_CAPACITY_EXHAUSTED ("No capacity available for model …
	// on the server"): Google's serving capacity for the model, not this
	// key's quota. A later retry is served; the key need not pause.
	{reason: "model_capacity", class: Transient, when: func(f *facts) bool {
		return slices.Contains(f.reasons, "MODEL_CAPACITY_EXHAUSTED")
	}},
	// Per-minute quotas, shared-capacity 429s and the legacy errors[].reason.
	{reason: "resource_exhausted", class: Throttled, when: func(f *facts) bool {
		return f.gstatus == "RESOURCE_EXHAUSTED" || slices.Contains(f.reasons, "rateLimitExceeded")
	}},
	{reason: "unavailable", class: Transient, when: func(f *facts) bool { return f.gstatus == "UNAVAILABLE" || f.gstatus == "INTERNAL" }},
})

var azureTable = newTable("azure", []rule{
	{reason: "content_filter", class: Rejected, when: func(f *facts) bool {
		return codeIn(f, "content_filter") || f.innerCode == "ResponsibleAIPolicyViolation"
	}},
	// Azure's only wait is in the message ("Please retry after 86400 seconds"):
	// a wait of an hour or more is a quota window, not pacing.
	{reason: "quota_window", class: Exhausted, when: func(f *facts) bool {
		return (f.status == 429 || f.code == "429") && textWaitAtLeast(f, LongWait)
	}},
})

// bedrockTable reads the x-amzn-ErrorType header; the body is only {"message"}.
var bedrockTable = newTable("bedrock", []rule{
	// 403: the account or role may not invoke this model (model access not
	// granted, IAM, Marketplace subscription). Every call on the key fails.
	{reason: "access_denied", class: Exhausted, when: func(f *facts) bool { return f.amzType == "AccessDeniedException" }},
	// 403 UnrecognizedClientException / ExpiredTokenException: the AWS
	// credentials of the key are invalid or expired; no call on them succeeds.
	{reason: "invalid_credentials", class: Exhausted, when: func(f *facts) bool {
		return f.amzType == "UnrecognizedClientException" || f.amzType == "ExpiredTokenException"
	}},
	// The same, when the x-amzn-ErrorType header did not reach us: the body is
	// only {"message"}, so the AWS wording is the narrow backup.
	{reason: "invalid_credentials_message", class: Exhausted, when: func(f *facts) bool {
		return f.amzType == "" && f.status == 403 && says(f, "security token included in the request is invalid",
			"security token included in the request is expired")
	}},
	// 400, but an account quota ("You can resubmit your request later"):
	// account-level, so exhausted; the breaker's probe finds when it lifts.
	{reason: "service_quota_exceeded", class: Exhausted, when: func(f *facts) bool {
		return f.amzType == "ServiceQuotaExceededException"
	}},
	// {"Output":{"__type":"com.amazon.coral.service#UnknownOperationException"}}
	// with a 200: the AWS JSON protocol's answer to a request for an operation
	// the endpoint does not have (a wrong base_url or path for the key). No
	// call on this key can succeed until its configuration is fixed.
	{reason: "unknown_operation", class: Exhausted, when: func(f *facts) bool { return f.amzType == "UnknownOperationException" }},
	// 408: the model ran past its timeout; it may have run and been billed.
	{reason: "model_timeout", class: Ambiguous, when: func(f *facts) bool { return f.amzType == "ModelTimeoutException" }},
	{reason: "throttled_per_day", class: Exhausted, when: func(f *facts) bool {
		return f.amzType == "ThrottlingException" && says(f, "per day")
	}},
	{reason: "throttled", class: Throttled, when: func(f *facts) bool { return f.amzType == "ThrottlingException" }},
	{reason: "validation", class: Rejected, when: func(f *facts) bool { return f.amzType == "ValidationException" }},
})

var openrouterTable = newTable("openrouter", []rule{
	// 402 in_flight_budget_exhausted (openrouter.ai/docs/api-reference/limits):
	// the credits the key's calls in flight hold would exceed its balance.
	// It clears when they settle (Retry-After says when); only a batch with
	// fewer calls in flight, not a top-up, is what the reaction needs.
	{reason: "in_flight_budget", class: Throttled, when: func(f *facts) bool {
		return f.limitSource == "openrouter_in_flight_budget"
	}},
	{reason: "credits", class: Exhausted, when: func(f *facts) bool {
		return f.status == 402 || f.code == "402" || f.metaErrorType == "payment_required" ||
			f.limitSource == "openrouter_credits" || f.limitSource == "openrouter_key_limit"
	}},
	// 429 "Rate limit exceeded: free-models-per-day": the daily :free-model
	// allowance (openrouter.ai/docs limits), named only in the message; it
	// resets daily or when credits are bought, so waiting minutes is useless.
	{reason: "free_models_per_day", class: Exhausted, when: func(f *facts) bool {
		return says(f, "free-models-per-day")
	}},
	{reason: "upstream_rate_limit", class: Throttled, when: func(f *facts) bool {
		return f.limitSource == "upstream_provider_shared_pool" || f.metaErrorType == "rate_limit_exceeded"
	}},
	{reason: "upstream", delegate: true, when: func(f *facts) bool { return f.metaRaw != "" }},
})

var cloudflareTable = newTable("cloudflare", []rule{
	// Guardrails / DLP blocks: the content, not the key.
	{reason: "guardrail_blocked", class: Rejected, when: func(f *facts) bool {
		return slices.ContainsFunc(f.cfCodes, func(c int) bool { return c == 2016 || c == 2017 || c == 2030 })
	}},
	// Gateway or Cloudflare API credential rejected.
	{reason: "gateway_auth", class: Exhausted, when: func(f *facts) bool {
		return slices.ContainsFunc(f.cfCodes, func(c int) bool { return c == 2009 || c == 10000 })
	}},
})

var mistralTable = newTable("mistral", []rule{
	{reason: "rate_limited", class: Throttled, when: func(f *facts) bool { return typeIn(f, "rate_limited") }},
	// 503 "Service tier capacity exceeded for this model." with type
	// invalid_request_error and code null: Mistral's backend is full (LiteLLM
	// PR #25078), not the request and not the account: transient, like any
	// backend overload, whatever the type says. Only the message names it.
	{reason: "capacity_exceeded", class: Transient, when: func(f *facts) bool {
		return says(f, "service tier capacity exceeded")
	}},
})

var groqTable = newTable("groq", []rule{
	// console.groq.com/docs/spend-limits: 400 with code blocked_api_access.
	{reason: "account_blocked", class: Exhausted, when: func(f *facts) bool {
		return codeIn(f, "blocked_api_access", "organization_restricted")
	}},
	// console.groq.com/docs/errors: 498 Flex tier capacity exceeded.
	{reason: "flex_capacity", class: Throttled, when: func(f *facts) bool { return f.status == 498 }},
})

// xAI sends the credit/spend condition as a bare JSON string, on 429 and 403.
// The body is a bare JSON string or {"code":"<gRPC status text>","error":"<message>"};
// neither carries a discriminating field, so the message text decides.
var xaiTable = newTable("xai", []rule{
	// 429/403 credits or spend cap; 403 for a new team without credits.
	{reason: "credits_or_spend_limit", class: Exhausted, when: func(f *facts) bool {
		return says(f, "available credits", "spending limit", "any credits", "run out of credits")
	}},
	// xAI answers a bad key with 400 "Incorrect API key provided".
	{reason: "invalid_api_key", class: Exhausted, when: func(f *facts) bool {
		return says(f, "incorrect api key provided", "incorrect%20api%20key%20provided")
	}},
})

// Fireworks: 412 code PRECONDITION_FAILED "Account … is suspended, possibly due
// to reaching the monthly spending limit or failure to pay past invoices".
var fireworksTable = newTable("fireworks", []rule{
	{reason: "account_suspended", class: Exhausted, when: func(f *facts) bool {
		return codeIn(f, "PRECONDITION_FAILED") || f.status == 412
	}},
})

var litellmTable = newTable("litellm", []rule{
	{reason: "budget_exceeded", class: Exhausted, when: func(f *facts) bool {
		return typeIn(f, "budget_exceeded") || says(f, "budget has been exceeded", "exceededbudget")
	}},
	// The proxy wraps an upstream 429 as type throttling_error; when the
	// upstream (Azure) asked for a wait of an hour or more it is a quota window.
	{reason: "quota_window", class: Exhausted, when: func(f *facts) bool {
		return typeIn(f, "throttling_error") && textWaitAtLeast(f, LongWait)
	}},
})

// genericTable runs last for every vendor: the HTTP status decides.
var genericTable = newTable("generic", []rule{
	{reason: "unauthorized", class: Exhausted, when: func(f *facts) bool { return f.status == 401 }},
	{reason: "payment_required", class: Exhausted, when: func(f *facts) bool { return f.status == 402 }},
	// 403 with nothing more specific: the key, its project, its region or a
	// firewall in front of it is refused. Every request on the key fails the
	// same way until someone fixes it; calling it rejected would dead-letter
	// the batch one record at a time.
	{reason: "forbidden", class: Exhausted, when: func(f *facts) bool { return f.status == 403 }},
	{reason: "bad_request", class: Rejected, when: func(f *facts) bool { return f.status == 400 && f.structured }},
	// 413: the request body is over a size limit; it never fits unchanged.
	{reason: "request_too_large", class: Rejected, when: func(f *facts) bool { return f.status == 413 }},
	// A 408 that says the server timed out reading the request body (GitHub
	// Copilot's OpenAI-compatible API: code user_request_timeout, "Timed out
	// reading request body"): the request never ran, so resending is safe.
	{reason: "request_not_read", class: Transient, when: func(f *facts) bool {
		return f.status == 408 && (codeIn(f, "user_request_timeout") || says(f, "timed out reading request body"))
	}},
	// The upstream may have run the request and billed it: 408, 504, and
	// Cloudflare's 524 (the origin accepted the connection, then did not
	// answer in time).
	{reason: "timeout", class: Ambiguous, when: func(f *facts) bool { return f.status == 408 || f.status == 504 || f.status == 524 }},
	// A gateway or router answering 429 with nothing we recognise may be its own
	// budget or its own rate limit. With a wait it reads as pacing; without one,
	// exhausted is the safe side: the breaker probes and resumes by itself,
	// whereas treating a spend cap as pacing snoozes jobs until they die.
	{reason: "gateway_rate_limit", class: Throttled, when: func(f *facts) bool {
		return f.status == 429 && f.path != PathDirect && f.path != "" && !f.structured && f.hint != nil
	}},
	{reason: "gateway_429_unexplained", class: Exhausted, unknown: true, when: func(f *facts) bool {
		return f.status == 429 && f.path != PathDirect && f.path != "" && !f.structured
	}},
	{reason: "rate_limit", class: Throttled, when: func(f *facts) bool { return f.status == 429 }},
	{reason: "server_error", class: Transient, when: func(f *facts) bool {
		return f.status == 500 || f.status == 502 || f.status == 503 || f.status == 529
	}},
})

// wrappedTable runs first for every vendor: a gateway or client proxy that
// answers with its own envelope and the upstream body as the error.message
// string ({"error":{"message":"{\n  \"error\": {…}}\n","code":400,"status":"Bad
// Request"}}, the Gemini API through an OpenAI-compatible proxy) is
// classified with the vendor's tables reading the upstream body, when that
// gives a known answer: the upstream's FAILED_PRECONDITION or
// API_KEY_INVALID, not the wrapper's "Bad Request".
var wrappedTable = newTable("wrapped", []rule{
	{reason: "upstream", wrapped: true, when: func(f *facts) bool {
		return strings.HasPrefix(f.msg, `"{`) && strings.Contains(f.msg, `error`)
	}},
})

// zhipuTable reads the business codes of Z.ai (Zhipu, BigModel): a string
// error.code of four digits, in {"error":{"code","message"}} or, on the
// Anthropic-compatible endpoint, inside an Anthropic error envelope. The
// classes follow the vendor's documented code table
// (docs.z.ai/api-reference/api-code, docs.bigmodel.cn/cn/api/api-code for
// the plan codes 1304 and 1309-1313), which the HTTP status does not carry:
// an account in arrears and a locked account come as 429s, a model that
// does not exist as a 400. It runs for "other" (Z.ai, BigModel and relays in
// front of them) and "anthropic" (the Anthropic-compatible endpoint); no
// other vendor's table sends these codes as strings (Mistral's "1300" comes
// with its own vendor).
var zhipuTable = newTable("zhipu", []rule{
	// 1000–1004: authentication failed, token invalid or expired.
	{reason: "credential", class: Exhausted, when: func(f *facts) bool {
		return codeIn(f, "1000", "1001", "1002", "1003", "1004")
	}},
	// 1113: "Your account is in arrears, please recharge and try again".
	{reason: "arrears", class: Exhausted, when: func(f *facts) bool { return codeIn(f, "1113") }},
	// 1110 inactive, 1111 does not exist, 1112 locked, 1121 locked for
	// irregular activity, 1220 no permission to access the API, 1309 the
	// GLM Coding Plan has expired, 1313 the account's usage was restricted
	// under the fair-use policy (lifted only on request to Z.ai).
	{reason: "account", class: Exhausted, when: func(f *facts) bool {
		return codeIn(f, "1110", "1111", "1112", "1121", "1220", "1309", "1313")
	}},
	// 1211 "Model does not exist, please check the model code"; 1221 the API
	// has been taken offline; 1222 the API does not exist; 1311 the plan does
	// not include this model. Every record of the pipeline fails the same
	// way: the key holds, as for model_not_found.
	{reason: "model_unavailable", class: Exhausted, when: func(f *facts) bool {
		return codeIn(f, "1211", "1221", "1222", "1311")
	}},
	// 1304 the API's daily call limit, 1308 "Usage limit reached for 5
	// hour" (the five-hour plan window), 1310 "Weekly/Monthly Limit
	// Exhausted", 1316 the five-hour window of the newer plans: a window of
	// hours or more, with the reset time in the message.
	{reason: "plan_window", class: Exhausted, when: func(f *facts) bool {
		return codeIn(f, "1304", "1308", "1310", "1316")
	}},
	// 1210 bad parameters, 1212 the model does not support this call
	// method, 1213–1215 a field missing, invalid or in conflict, 1261 the
	// prompt is over the maximum length. (1301, unsafe or sensitive content,
	// comes as a 400 and is rejected by the status table.)
	{reason: "bad_request", class: Rejected, when: func(f *facts) bool {
		return codeIn(f, "1210", "1212", "1213", "1214", "1215", "1261")
	}},
	// 1302 concurrency too high, 1303 frequency too high.
	{reason: "rate_limit", class: Throttled, when: func(f *facts) bool { return codeIn(f, "1302", "1303") }},
	// 1305 and 1312 the model is overloaded ("访问量过大"), 1234 a network
	// error.
	{reason: "overloaded", class: Transient, when: func(f *facts) bool { return codeIn(f, "1305", "1312", "1234") }},
})

// minimaxTable reads MiniMax's business codes (its documented error-code
// table, platform.minimax.io/docs/api-reference/errorcode), which its HTTP
// status does not carry: the OpenAI-compatible chatcompletion_v2 answers
// 200 with a non-zero base_resp.status_code, and the Anthropic-compatible
// endpoint puts the code at the end of the message ("insufficient balance
// (1008)", "system error (1033)") with a type of its own choosing (an
// api_error 500 for a balance). It runs for "other" (MiniMax and relays in
// front of it) and "anthropic" (the Anthropic-compatible endpoint). The code
// is read only from base_resp or from a message ending in " (NNNN)"; Z.ai's
// four-digit codes, in error.code, are the zhipu table's.
var minimaxTable = newTable("minimax", []rule{
	// 1004 not authorized / token not match group, 2049 invalid api key.
	{reason: "credential", class: Exhausted, when: func(f *facts) bool { return minimaxIn(f, "1004", "2049") }},
	// 1008 insufficient balance.
	{reason: "insufficient_balance", class: Exhausted, when: func(f *facts) bool { return minimaxIn(f, "1008") }},
	// 1002 rate limit, 1039 token limit, 1041 conn limit, 2045 rate growth
	// limit: the docs say to retry later or to smooth the request rate.
	{reason: "rate_limit", class: Throttled, when: func(f *facts) bool { return minimaxIn(f, "1002", "1039", "1041", "2045") }},
	// 1026 input new_sensitive, 1027 output new_sensitive: the content.
	{reason: "content_policy", class: Rejected, when: func(f *facts) bool { return minimaxIn(f, "1026", "1027") }},
	// 1042 invisible character ratio limit, 2013 invalid params (also
	// "context window exceeds limit (2013)").
	{reason: "bad_request", class: Rejected, when: func(f *facts) bool { return minimaxIn(f, "1042", "2013") }},
	// 1000 unknown error, 1024 internal error, 1033 system error: the server
	// failed the request; the docs say to retry later. (1001, request
	// timeout, is left out: the request may have run.)
	{reason: "server_error", class: Transient, when: func(f *facts) bool { return minimaxIn(f, "1000", "1024", "1033") }},
})

// tencentcloudTable reads TencentCloud API 3.0's error codes, which come in
// a 200 (Response.Error.Code, classifyOtherErrorIn2xx): the common codes of
// www.tencentcloud.com/document/api/1284/75543. AuthFailure.* is a key that
// is refused (invalid, expired, deleted, signature): every call fails the
// same way. Other codes go to the signal layer, else ambiguous (an error in
// a 2xx body).
var tencentcloudTable = newTable("tencentcloud", []rule{
	{reason: "credential", class: Exhausted, when: func(f *facts) bool { return strings.HasPrefix(f.code, "AuthFailure") }},
})

// minimaxIn reports whether f's MiniMax code (minimaxCode) is one of set.
func minimaxIn(f *facts, set ...string) bool {
	c := minimaxCode(f)
	return c != "" && slices.Contains(set, c)
}

// minimaxCode is MiniMax's business code: base_resp.status_code in a 2xx
// body, or the four digits of a message that ends in " (NNNN)" as the
// Anthropic-compatible endpoint writes it.
func minimaxCode(f *facts) string {
	if f.baseResp != "" {
		return f.baseResp
	}
	m := strings.TrimSpace(f.lower())
	n := len(m)
	if n < 8 || m[n-1] != ')' || m[n-6] != '(' || m[n-7] != ' ' {
		return ""
	}
	code := m[n-5 : n-1]
	for i := 0; i < 4; i++ {
		if code[i] < '0' || code[i] > '9' {
			return ""
		}
	}
	return code
}

// chains says which tables run, in order, for each vendor. The wrapped
// table runs first and the model table next everywhere (one
// model-not-found rule for every vendor).
var chains = map[string][]*table{
	"openai":                {wrappedTable, modelTable, requestTable, openaiTable, genericTable},
	"anthropic":             {wrappedTable, zhipuTable, minimaxTable, modelTable, requestTable, anthropicTable, genericTable},
	"gemini":                {wrappedTable, modelTable, requestTable, googleTable, genericTable},
	"vertex":                {wrappedTable, modelTable, requestTable, googleTable, genericTable},
	"azure-openai":          {wrappedTable, modelTable, requestTable, azureTable, openaiTable, genericTable},
	"bedrock":               {wrappedTable, modelTable, requestTable, bedrockTable, genericTable},
	"openrouter":            {wrappedTable, modelTable, requestTable, openrouterTable, openaiTable, genericTable},
	"cloudflare-ai-gateway": {wrappedTable, modelTable, requestTable, cloudflareTable, openaiTable, genericTable},
	"mistral":               {wrappedTable, modelTable, requestTable, mistralTable, openaiTable, genericTable},
	"groq":                  {wrappedTable, modelTable, requestTable, groqTable, openaiTable, genericTable},
	"deepseek":              {wrappedTable, modelTable, requestTable, openaiTable, genericTable},
	"together":              {wrappedTable, modelTable, requestTable, openaiTable, genericTable},
	"fireworks":             {wrappedTable, modelTable, requestTable, fireworksTable, openaiTable, genericTable},
	"xai":                   {wrappedTable, modelTable, requestTable, xaiTable, openaiTable, genericTable},
	"cohere":                {wrappedTable, modelTable, requestTable, openaiTable, genericTable},
	"vllm":                  {wrappedTable, modelTable, requestTable, openaiTable, genericTable},
	"ollama":                {wrappedTable, modelTable, requestTable, openaiTable, genericTable},
	"litellm-proxy":         {wrappedTable, modelTable, requestTable, litellmTable, openaiTable, genericTable},
	"other":                 {wrappedTable, zhipuTable, minimaxTable, modelTable, requestTable, openaiTable, genericTable},
}

// Vendors lists the vendor names the classifier has rule sets for.
func Vendors() []string {
	out := make([]string, 0, len(chains))
	for v := range chains {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// KnownVendor reports whether v names a rule set; Classify treats any other
// name as "other".
func KnownVendor(v string) bool {
	_, ok := chains[v]
	return ok
}

// upstreamVendor maps an OpenRouter provider_name to a rule set.
func upstreamVendor(provider string) string {
	p := strings.ToLower(provider)
	switch {
	case strings.Contains(p, "azure"):
		return "azure-openai"
	case strings.Contains(p, "openai"):
		return "openai"
	case strings.Contains(p, "anthropic"):
		return "anthropic"
	case strings.Contains(p, "ai studio"):
		return "gemini"
	case strings.Contains(p, "google"), strings.Contains(p, "vertex"):
		return "vertex"
	case strings.Contains(p, "bedrock"):
		return "bedrock"
	case strings.Contains(p, "mistral"):
		return "mistral"
	case strings.Contains(p, "groq"):
		return "groq"
	case strings.Contains(p, "deepseek"):
		return "deepseek"
	case strings.Contains(p, "xai"):
		return "xai"
	}
	return "other"
}
