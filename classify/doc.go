// Package classify says what an LLM provider's response means for the
// reaction: [Classify] turns an [Observation] (vendor, path, phase, status,
// headers, body) into a [Verdict] (class, retry_after_s, code, reason,
// known). It is pure: no I/O, no clock, no package state that changes an
// answer (a pool of scratch facts is reset on every call).
//
// # Rule order
//
//  1. Phase. not_sent is transient (nothing reached the provider);
//     sent_no_response and stream are ambiguous (the request may have run and
//     been billed), whatever error a broken stream carried.
//  2. Odd statuses (0, 1xx, 3xx, >599): rejected, known:false.
//  3. 2xx: ok, unless the body carries an error. A Gemini/Vertex blocked
//     prompt (promptFeedback.blockReason) or blocked candidate (finishReason
//     SAFETY, PROHIBITED_CONTENT, RECITATION, …) is rejected; a generation
//     that failed midway (OpenRouter finish_reason "error") is ambiguous for
//     the same billing reason as a stream; any other error envelope (an
//     OpenAI-compatible {"error":…}, Bedrock's {"Output":{"__type":…}}) is
//     read with the tables below using the status it names, and kept when
//     that says exhausted, rejected or throttled, else ambiguous.
//  4. User rules ([Classifier], triage.toml [[rules]]), in order.
//  5. Errors: the wrapped table (an upstream body a gateway carries as its
//     error.message string is classified with the same vendor's tables, kept
//     when that gives a known answer), for vendors other and anthropic the
//     Z.ai code table (a four-digit string error.code, read with Z.ai's
//     documented table), then the model-not-found table (one
//     rule for every vendor: a model,
//     deployment or endpoint the key cannot reach is exhausted,
//     model_unavailable; OpenRouter's 404 for a request no endpoint takes as
//     sent is the request table's rejected unsupported_by_endpoints), then
//     the vendor's tables, top to bottom, first
//     match wins, then the generic status table. Rows read structured fields
//     first (error.type, error.code, error.status, Google details[]
//     ErrorInfo/QuotaFailure/RetryInfo, Anthropic error.details.error_code,
//     OpenRouter error.metadata, x-amzn-ErrorType, the Cloudflare error[]
//     codes), the HTTP status second, and message text only as a narrow,
//     vendor-tied backup where the vendor gives no structured field
//     (Anthropic credit balance, workspace usage limits and long-context
//     credits, Google "limit: 0", per-day windows named only in Groq and
//     Bedrock messages, OpenAI's "Request too large", xAI's bare string,
//     Mistral's "Service tier capacity exceeded", a 408 "Timed out reading
//     request body"). OpenRouter's upstream body (error.metadata.raw, a
//     string) is classified with the upstream provider's tables when that
//     gives a known answer.
//     Under the vendor tables and over the status table, the signal layer
//     (signals.go) reads any JSON error shape against one lexicon with a
//     source per entry (money, account, a model that cannot load, content
//     policy, a stated size limit, quota windows, rate, capacity, in that
//     order of precedence); it also overrules the two weak OpenAI rows
//     (rate_limit, server_error) with a terminal answer, and the pacing row
//     with a body that states only an overload (transient). Verdict.DecidedBy
//     names the layer that decided; NeedsRule is true for what no vendor
//     rule knows (the worker's unknown-error alert).
//  6. Defaults: an unknown 4xx is rejected and an unknown 5xx transient, both
//     known:false so they are counted and alerted on.
//  7. x-should-retry: "false" turns transient into rejected and throttled
//     into exhausted; "true" only lifts an unknown-4xx default to transient.
//  8. Retry hint (retry-after-ms, retry-after seconds or HTTP date measured
//     against the response's own Date header, Google RetryInfo.retryDelay,
//     then a wait stated in the message text: "try again in 7m12s", "retry
//     after 2 seconds", "resets after 5s") goes in retry_after_s for
//     throttled, transient and exhausted. A wait of an hour or more
//     ([LongWait]) makes a throttled or transient verdict exhausted
//     (reason +long_wait): it names a quota window. For an exhausted key the
//     wait is reported only: the reaction is the breaker's probe.
//
// # Safety argument
//
// The two mistakes that cost money or data are putting a terminal error
// (rejected, exhausted) in a retrying class, and calling an exhausted key
// rejected (which dead-letters every job one by one instead of pausing the
// key). So: account-level rows (billing, quota, spend caps, invalid keys,
// per-day windows) come before the pacing rows of the same status; no header
// can make a rule's exhausted or rejected answer retrying; when in doubt
// between throttled and exhausted the classifier picks exhausted (a gateway's
// bare 429 without a wait, a throttle the server says not to retry), because
// the breaker probes and resumes by itself while a misread spend cap would
// snooze jobs until they die; and when a request may have run, the answer is
// ambiguous, so the retry goes through the idempotency check.
//
// Every table row is pinned by a fixture in testdata/ holding the real vendor
// body and where it came from; a test fails if a row has none.
//
// # Reading the body
//
// The body is validated once (valid.go) and walked once, decoding only the
// members the rules read (wire.go); the message text is decoded only when a rule reads
// it. The result is exactly what encoding/json gave for any input, checked
// against the former encoding/json reader by FuzzParseBodyMatchesEncodingJSON.
package classify
