// Package provider is triage's HTTP client for LLM APIs. It sends one request
// and describes what happened as a classify.Observation; it never classifies
// and never retries (River is the only retry loop; docs/design.md, "Classes and reactions").
//
// Two wire formats are spoken:
//
//   - OpenAI-compatible chat completions: POST {base_url}/chat/completions with
//     "Authorization: Bearer KEY", for vendors openai, azure-openai (which
//     also gets "api-key: KEY"; a base URL such as
//     https://R.openai.azure.com/openai/deployments/D?api-version=V keeps
//     its query), openrouter, groq, vllm, ollama, together, fireworks, xai,
//     deepseek, mistral, litellm-proxy, cloudflare-ai-gateway (the key is the
//     upstream provider's; an authenticated gateway's cf-aig-authorization
//     header is not sent) and other.
//   - Anthropic messages: POST {base_url}/messages with "x-api-key: KEY" and
//     "anthropic-version: 2023-06-01", for vendor anthropic.
//
// Vendors gemini, vertex, bedrock and cohere have native formats this package
// does not speak; New returns an error wrapping ErrUnsupportedVendor for them.
// (Reach them through an OpenAI-compatible gateway or router and configure the
// gateway's vendor instead.)
//
// Every request carries "Idempotency-Key" and "X-Triage-Record" headers.
// IdempotencyKey derives the key from batch, record, pipeline and RequestHash,
// so a retry of the same request reuses it and a changed request gets a new
// one.
//
// Transport failures are split with net/http/httptrace's WroteRequest: a
// failure before the request was fully written is PhaseNotSent (cannot have
// been billed); after it, PhaseSentNoResponse (may have been billed). A 2xx
// whose body could not be read completely is PhaseSentNoResponse too; a 2xx
// stream that ends early or carries an error event is PhaseStream.
//
// Redirects are not followed: a 3xx is returned as the Observation.
//
// RequestBody (Client.Body) and DecodeResponse are Do's request renderer and
// answer decoder on their own, for the Batch API client (worker/batchapi): a
// batch line carries the same body a synchronous call sends, and its embedded
// answer becomes the same Result, so one classifier serves both modes.
//
// The API key never appears in an error, and neither does a response body:
// bodies go only into Result.Observation.Body (capped at MaxBodyBytes).
package provider
