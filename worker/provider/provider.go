package provider

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/triage-dev/triage/classify"
)

const (
	// TimeoutDefault is Options.Timeout's default: the per-attempt timeout,
	// covering connect, write, response and reading the body.
	TimeoutDefault = 60 * time.Second
	// ConcurrencyDefault is Options.Concurrency's default.
	ConcurrencyDefault = 8
	// MaxBodyBytes caps Observation.Body: longer bodies are cut at this size.
	MaxBodyBytes = 64 << 10
	// AnthropicVersion is sent as the anthropic-version header.
	AnthropicVersion = "2023-06-01"
	// HeaderIdempotencyKey and HeaderRecord are sent on every request.
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderRecord         = "X-Triage-Record"
)

// Format is a wire format.
type Format string

const (
	// FormatOpenAI is OpenAI-compatible chat completions.
	FormatOpenAI Format = "openai"
	// FormatAnthropic is Anthropic messages.
	FormatAnthropic Format = "anthropic"
	// FormatResponses is the OpenAI Responses API (POST {base_url}/responses),
	// for vendor openai only, chosen with Options.Format.
	FormatResponses Format = "responses"
)

var (
	// ErrUnsupportedVendor: the vendor has no wire format here (gemini, vertex,
	// bedrock, cohere, or a name that is not a vendor).
	ErrUnsupportedVendor = errors.New("provider: vendor has no supported wire format")
	// ErrInvalidOptions is wrapped by New's other errors.
	ErrInvalidOptions = errors.New("provider: invalid options")
	// ErrInvalidRequest is wrapped by Do's errors: the Request itself is wrong
	// (a programming or configuration error, not a network outcome).
	ErrInvalidRequest = errors.New("provider: invalid request")
)

// FormatFor returns the wire format for a vendor name (the vendors of docs/classifier.md),
// or an error wrapping ErrUnsupportedVendor.
func FormatFor(vendor string) (Format, error) { return formatFor(vendor) }

// Options configure a Client. One Client per [[keys]] entry.
type Options struct {
	// Vendor selects the wire format and is copied to Observation.Vendor.
	// Required.
	Vendor string
	// Format overrides the vendor's wire format: FormatResponses (vendor
	// openai only), or the vendor's own. Default "": the vendor's
	// (FormatFor). Another vendor's format is an error wrapping
	// ErrInvalidOptions.
	Format Format
	// Path is copied to Observation.Path. Default classify.PathDirect.
	Path classify.Path
	// BaseURL is the API root, e.g. "https://api.openai.com/v1". Required.
	BaseURL string
	// APIKey is sent as Bearer token or x-api-key. Required; never logged or
	// put in an error.
	APIKey string
	// Timeout bounds each Do call as a whole, reading the body included.
	// Default TimeoutDefault (60s).
	Timeout time.Duration
	// Concurrency sizes the connection pool (MaxIdleConnsPerHost). Default
	// ConcurrencyDefault (8). Ignored when HTTPClient is set.
	Concurrency int
	// HTTPClient replaces the default client (one with its own pooled
	// Transport). Its Timeout should be zero: Do applies Timeout itself.
	HTTPClient *http.Client
}

// Request is one model call.
type Request struct {
	// Model is the vendor's model id. Required.
	Model string
	// System is the system prompt; "" sends none.
	System string
	// Prompt is the user message. Required.
	Prompt string
	// MaxTokens caps output tokens. Required (> 0): Anthropic requires it.
	MaxTokens int
	// Temperature is sent when non-nil.
	Temperature *float64
	// JSON asks for one JSON object: OpenAI response_format json_object.
	// Anthropic has no such switch; the system prompt must ask for JSON.
	JSON bool
	// Schema, with JSON, asks for one JSON object that follows this JSON
	// Schema, in the vendor's structured-output form: OpenAI
	// response_format {type: "json_schema", json_schema: {name, schema,
	// strict}}; Anthropic, which has no such switch in messages, one tool
	// named SchemaName with the schema as its input_schema and tool_choice
	// forcing it, whose tool_use input becomes Result.Content. nil: none.
	Schema json.RawMessage
	// SchemaName names the schema (OpenAI json_schema.name, the Anthropic
	// tool's name): letters, digits, '_' and '-', at most 64. Required with
	// Schema.
	SchemaName string
	// SchemaStrict is OpenAI's json_schema.strict: the vendor holds the
	// answer to the schema (and refuses schemas outside its strict subset).
	SchemaStrict bool
	// Stream asks for a server-sent-event stream; Result.Content is assembled
	// from the deltas.
	Stream bool
	// IdleTimeout, with Stream, cuts the stream when no byte of it arrived
	// for this long (Result.IdleTimedOut). Zero: only the client's Timeout.
	IdleTimeout time.Duration
	// StreamMax, with Stream, is the ceiling of a streamed call: the
	// client's Timeout then bounds only the wait for the stream to start
	// (its 200 and event-stream headers); from there a stream that keeps
	// delivering runs until it ends, IdleTimeout of silence or StreamMax
	// since the send, whichever comes first. Zero, or not longer than
	// the client's Timeout: the Timeout bounds the whole call.
	StreamMax time.Duration
	// Store, in the OpenAI formats, asks the provider to keep the completion
	// (store: true) tagged with IdempotencyKey in its metadata
	// (MetadataIdempotencyKey), so that Client.Lookup can find it after a
	// lost answer. Ignored by other formats. Not part of RequestHash.
	Store bool
	// Background, in the Responses format and not streamed, creates the
	// response in background mode (background: true, store: true): the
	// answer is the response's id in status "queued", to be polled with
	// Client.Poll. Ignored by other formats. Not part of RequestHash.
	Background bool
	// IdempotencyKey is sent as Idempotency-Key. Required; see IdempotencyKey.
	IdempotencyKey string
	// RecordID is sent as X-Triage-Record. Required.
	RecordID string
}

// Result is what one call produced. Observation describes every outcome,
// success included; the other fields are filled when a 2xx body was decoded.
type Result struct {
	// Observation: Vendor and Path from Options; Phase; Status and lower-cased
	// Headers when a status line arrived; Body (at most MaxBodyBytes) as
	// received, or the stream text received for PhaseStream.
	Observation classify.Observation
	// Content is the model's text on a decoded 2xx.
	Content string
	// FinishReason is the vendor's finish_reason / stop_reason on a decoded
	// 2xx ("stop", "length", "end_turn", "max_tokens", "refusal", ...). In
	// the Responses format: the response's status ("completed", "failed",
	// "queued", ...), or for an incomplete one its incomplete_details.reason
	// ("max_output_tokens", "content_filter").
	FinishReason string
	// ResponseID and ResponseStatus, in the Responses format, are the
	// response's id and status ("queued", "in_progress", "completed",
	// "failed", "incomplete", "cancelled") when a response object arrived.
	ResponseID, ResponseStatus string
	// InputTokens and OutputTokens come from the response's usage.
	InputTokens, OutputTokens int
	// Malformed, on a 2xx, says the body could not be decoded in the vendor's
	// wire format (a garbage 200 from a proxy); a short description, never the
	// body. Content is then empty.
	Malformed string
	// NetworkError, when no status line arrived, says why: the network
	// error and the host, e.g. "dial tcp 127.0.0.1:1: connect: connection
	// refused (host 127.0.0.1:1)". Never the URL's query or the API key.
	NetworkError string
	// IdleTimedOut: a stream was cut by Request.IdleTimeout. Its phase is
	// PhaseStream and Content holds the text received before the stall.
	IdleTimedOut bool
	// Elapsed is the wall time of the call.
	Elapsed time.Duration
	// RateLimit is what the response's rate-limit headers said, on every
	// status (see ParseRateLimit); zero when none arrived.
	RateLimit RateLimit
}

// Client calls one key's endpoint. Safe for concurrent use.
type Client struct {
	format  Format
	vendor  string
	path    classify.Path
	baseURL *url.URL
	// endpoint is the URL Do posts to, built once (endpointFor).
	endpoint string
	apiKey   string
	timeout  time.Duration
	hc       *http.Client
}

// String describes the client without its API key.
func (c *Client) String() string {
	u := *c.baseURL
	u.User, u.RawQuery = nil, ""
	return "provider.Client(" + c.vendor + " " + string(c.format) + " " + u.String() + ")"
}

// EstimatedTokens is the request's input tokens at about four bytes a
// token: what the pacer charges against a tokens-per-minute limit (it
// calibrates the estimate with the usage the provider reports), and what an
// estimate of a batch counts.
func (r Request) EstimatedTokens() int {
	return (len(r.System) + len(r.Prompt)) / 4
}
