package config

import (
	"encoding/json"
	"slices"
	"text/template"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/triage-dev/triage/classify"
)

// Defaults for fields left out of triage.toml (or zero in a Config built in
// Go). WithDefaults fills them in; Parse and Load call WithDefaults.
const (
	// ConcurrencyDefault is Key.Concurrency's default: calls in flight per key
	// per process.
	ConcurrencyDefault = 8
	// TimeoutDefault is Key.Timeout's default: the per-attempt timeout, covering
	// connect, request, response and reading the body.
	TimeoutDefault = 60 * time.Second
	// ProbeIntervalDefault is Key.ProbeInterval's default: how long an open
	// breaker waits before one probe request.
	ProbeIntervalDefault = 60 * time.Second
	// RetryBudgetDefault is Key.RetryBudget's default: retries are at most this
	// share of first attempts, fleet-wide, per key.
	RetryBudgetDefault = 0.2
	// PathDefault is Key.Path's default.
	PathDefault = classify.PathDirect
	// MaxAttemptsDefault is Pipeline.MaxAttempts's default: River attempts per
	// record (transient failures and ambiguous calls count, throttling does not).
	MaxAttemptsDefault = 6
	// MaxTokensDefault is Pipeline.MaxTokens's default: the output token cap sent
	// with every request.
	MaxTokensDefault = 1024
	// AmbiguousRetriesDefault is Pipeline.AmbiguousRetries's default: how many
	// times a call whose outcome is unknown is retried (with the same
	// idempotency key) before the record is dead-lettered.
	AmbiguousRetriesDefault = 1
	// MaxSnoozesDefault is Pipeline.MaxSnoozes's default: snoozes (throttled,
	// exhausted, paused) a job may take before it is dead-lettered as
	// snoozed_out.
	MaxSnoozesDefault = 100

	// FallbackGraceDefault: a breaker open this long moves its key's jobs to
	// a fallback. Longer than the storm breaker's first probes (2 s, 4 s,
	// 8 s cooldowns), so a storm that heals at once, or an exhaustion topped
	// up straight away, does not send the whole batch elsewhere.
	FallbackGraceDefault = 30 * time.Second
	// OutputDefault is Pipeline.Output's default.
	OutputDefault = OutputJSON
)

// Output is what a pipeline expects the model to answer.
type Output string

const (
	// OutputJSON: one JSON object; anything else is dead-lettered as
	// invalid_output. Requests ask the vendor for a JSON object where the wire
	// format allows it.
	OutputJSON Output = "json"
	// OutputText: free text, stored as a JSON string.
	OutputText Output = "text"
)

// Vendors returns the vendor names triage.toml accepts in [[keys]] vendor, the
// classifier's rule sets (docs/classifier.md), in documentation
// order. Not every vendor has a wire format in worker/provider; see
// provider.FormatFor.
func Vendors() []string { return slices.Clone(vendors) }

var vendors = []string{
	"openai", "anthropic", "gemini", "vertex", "azure-openai", "bedrock", "openrouter",
	"cloudflare-ai-gateway", "mistral", "groq", "deepseek", "together", "fireworks", "xai",
	"cohere", "vllm", "ollama", "litellm-proxy", "other",
}

// Config is a parsed triage.toml.
type Config struct {
	// Database is [database].
	Database Database `toml:"database"`
	// Alerts is [alerts].
	Alerts Alerts `toml:"alerts"`
	// Keys is [[keys]]: one River queue and one breaker per key. At least one.
	Keys []Key `toml:"keys"`
	// Models is [[models]]: which key serves a model and what it costs.
	Models []Model `toml:"models"`
	// Pipelines is [[pipelines]]: prompt and output contract per job kind.
	Pipelines []Pipeline `toml:"pipelines"`
	// Rules is [[rules]]: classifier rules checked before the built-in
	// tables. Default none. See Rule and Classifier.
	Rules []Rule `toml:"rules"`
	// Retention is [retention]: how long finished work is kept. See
	// Retention for the defaults.
	Retention Retention `toml:"-"`

	// name is the file name used in error messages ("triage.toml").
	name string
	// classifier is built from Rules by Validate.
	classifier *classify.Classifier
}

// Database is the [database] table.
type Database struct {
	// URL is the PostgreSQL connection URL. Default "": the DATABASE_URL
	// environment variable if set, else the private local cluster in
	// .triage/pg. Use Config.DatabaseURL rather than reading this directly.
	URL string `toml:"url"`
}

// Alerts is the [alerts] table.
type Alerts struct {
	// WebhookURL receives a JSON POST per alert. Default "": log only.
	WebhookURL string `toml:"webhook_url"`
	// MaxUSDPerHour alerts when fleet spend over the last hour exceeds it.
	// Default 0: no spend-rate alert.
	MaxUSDPerHour float64 `toml:"max_usd_per_hour"`
}

// Key is one [[keys]] entry: an API key at one endpoint, with its own River
// queue, breaker, pause and concurrency.
type Key struct {
	// Name identifies the key (queue name, breaker, ledger). Required, unique.
	Name string `toml:"name"`
	// Vendor selects the classifier rule set and the wire format. Required, one
	// of Vendors.
	Vendor string `toml:"vendor"`
	// Path is which layers a call crosses: direct, router or gateway. Default
	// PathDefault (direct).
	Path classify.Path `toml:"path"`
	// Format is the wire format: "" (the vendor's: chat completions, or
	// Anthropic messages for vendor anthropic), "chat_completions",
	// "messages", or "responses" (the OpenAI Responses API, vendor "openai"
	// only). See Format.
	Format Format `toml:"format"`
	// Background, with format = "responses", creates each non-streamed
	// call in the Responses API's background mode: the create answers at
	// once with the response's id, which the worker stores on the attempt
	// before it polls the response to its end (at most every
	// BackgroundPollMax). A lost answer can then only be the create's; a
	// worker that stops while the response runs leaves its id, and the
	// next run polls it instead of creating it again. Background
	// responses are kept at the provider (store: true). Default false.
	Background bool `toml:"background"`
	// BaseURL is the API root, e.g. "https://api.openai.com/v1"; requests go to
	// {BaseURL}/chat/completions or {BaseURL}/messages. Required, http or https.
	BaseURL string `toml:"base_url"`
	// APIKeyEnv names the environment variable holding the API key. Required;
	// the key itself never appears in the file. Read it with APIKey.
	APIKeyEnv string `toml:"api_key_env"`
	// Concurrency is the most calls in flight per process on this key (the AIMD
	// ceiling). Default ConcurrencyDefault (8).
	Concurrency int `toml:"concurrency"`
	// RPM and TPM are the key's requests and tokens per minute as the
	// provider's account page states them, when known. The pacer starts at
	// them (less its headroom) instead of its slow start, until the
	// provider's rate-limit headers name the limit; a dry run times a batch
	// at them when no pace was learned yet. Default 0: unknown. Positive
	// when set.
	RPM int `toml:"rpm"`
	TPM int `toml:"tpm"`
	// Timeout is the per-attempt timeout ("60s" in the file). Default
	// TimeoutDefault (60s).
	Timeout time.Duration `toml:"timeout"`
	// ProbeInterval is how long an open breaker waits before one probe ("60s"
	// in the file). Default ProbeIntervalDefault (60s).
	ProbeInterval time.Duration `toml:"probe_interval"`
	// FetchCooldown is the shortest time between two fetches of jobs from
	// the key's River queue ("10ms" in the file): each fetch takes at most
	// Concurrency jobs, so Concurrency/FetchCooldown bounds the jobs a
	// process starts per second on the key. Default FetchCooldownFor
	// (100 ms divided by Concurrency, between 2 ms and 100 ms: 12.5 ms at
	// the default concurrency of 8, 6.25 ms at 16, so a fast provider is
	// not held back by the worker); between 1 ms and 1 s.
	FetchCooldown time.Duration `toml:"fetch_cooldown"`
	// PrepaidUSD is the prepaid balance; an alert fires at 70 % spent.
	// Default 0: no prepaid alert.
	PrepaidUSD float64 `toml:"prepaid_usd"`
	// RetryBudget caps retries at this share of first attempts over a sliding
	// window, fleet-wide, in [0, 1]. Default RetryBudgetDefault (0.2) when
	// absent from the file; an explicit 0 in the file means no retries and is
	// kept. In a Config built in Go, WithDefaults treats 0 as unset.
	RetryBudget float64 `toml:"retry_budget"`
	// IdempotentReplay says the endpoint answers a repeated Idempotency-Key
	// with the first call's answer instead of running (and billing) the
	// request again, as some gateways and the fake provider do. Only then
	// does a successful resend settle earlier unanswered sends as billed
	// once; otherwise they stay possibly billed in the ledger, an honest
	// upper bound to reconcile with the vendor's invoice. Default false.
	IdempotentReplay bool `toml:"idempotent_replay"`
	// Ambiguous is the policy for a possibly billed attempt (the answer to
	// a sent call was lost): "retry", "dead_letter" or "lookup" (vendor
	// "openai" only). Default AmbiguousDefault (retry). See Ambiguous.
	Ambiguous Ambiguous `toml:"ambiguous"`
	// LookupWait bounds a look-up (ambiguous = "lookup"): how long the
	// worker keeps asking the provider's store for the call before taking
	// it as not run and resending. Default LookupWaitDefault (30s).
	LookupWait time.Duration `toml:"lookup_wait"`

	// The storm breaker: it trips on StormFailures transient failures in a
	// row, or on a StormShare of transient failures among at least
	// StormMinCalls calls over StormWindow, in one process; the fleet shares
	// the decision. While open the key's queue is paused and no attempt is
	// spent; probes go after a cooldown of StormProbeMin that doubles with
	// every failed probe up to StormProbeMax. An alert fires once it has been
	// open for StormAlertAfter. Zero values take the defaults of
	// keys.StormSettings (5, 0.5, 10, "10s", "2s", "60s") and
	// stormwatch.AlertAfterDefault ("5m"). In the file, storm_failures = 0
	// or storm_share = 0 turns that trigger off (stored as -1).
	StormFailures   int           `toml:"storm_failures"`
	StormShare      float64       `toml:"storm_share"`
	StormMinCalls   int           `toml:"storm_min_calls"`
	StormWindow     time.Duration `toml:"storm_window"`
	StormProbeMin   time.Duration `toml:"storm_probe_min"`
	StormProbeMax   time.Duration `toml:"storm_probe_max"`
	StormAlertAfter time.Duration `toml:"storm_alert_after"`

	// The safety net, two breakers that watch outcomes rather than bodies
	// and hold the key (its queue paused fleet-wide, a key_suspect alert,
	// one probe per ProbeInterval) when the classifier may have missed an
	// account problem: SuspectRejections different records rejected in a
	// row with one failure fingerprint and no success between them (the
	// dead letters of that fingerprint go back to the queue by themselves),
	// or only throttled answers naming no wait, none succeeding, for
	// ThrottleHoldAfter. Zero values take keys.WatchSettings's defaults (8,
	// "2s"). In the file, suspect_rejections = 0 or throttle_hold_after =
	// "0s" turns that breaker off (stored as -1); suspect_rejections = 1
	// is refused.
	SuspectRejections int           `toml:"suspect_rejections"`
	ThrottleHoldAfter time.Duration `toml:"throttle_hold_after"`

	// The key's batch submitter (pipelines in mode batch or auto): it sends
	// the pending lines as one provider batch once no new line has come for
	// BatchGather, and polls a provider batch first after BatchPollMin,
	// doubling up to BatchPollMax. Zero: worker.Options.Batch, else the
	// submitter's defaults (30s, 30s, 10m), which suit batches of hours; a
	// small run against a quick endpoint (a local test server, a gateway
	// that answers batches in seconds) waits a minute or more for them.
	BatchGather  time.Duration `toml:"batch_gather"`
	BatchPollMin time.Duration `toml:"batch_poll_min"`
	BatchPollMax time.Duration `toml:"batch_poll_max"`

	retryBudgetSet bool
}

// Model is one [[models]] entry.
type Model struct {
	// Name is the vendor's model id, sent as "model". Required, unique.
	Name string `toml:"name"`
	// Key names the [[keys]] entry that serves this model. Required.
	Key string `toml:"key"`
	// ContextTokens is the model's context window. Default 0: unknown, not
	// checked.
	ContextTokens int `toml:"context_tokens"`
	// InputUSDPerMTok is the price of one million input tokens. Default 0.
	InputUSDPerMTok float64 `toml:"input_usd_per_mtok"`
	// OutputUSDPerMTok is the price of one million output tokens. Default 0.
	OutputUSDPerMTok float64 `toml:"output_usd_per_mtok"`

	// The capability table a fallback is checked against (see
	// decide.Capable); ContextTokens above is part of it.

	// MaxOutputTokens is the most output the model can produce in one
	// answer. Default 0: unknown, not checked.
	MaxOutputTokens int `toml:"max_output_tokens"`
	// JSONMode: the model supports the vendor's JSON output mode, so it may
	// serve output = "json" pipelines as a fallback. Default false: a model
	// is not assumed to keep a contract nobody said it keeps.
	JSONMode bool `toml:"json_mode"`

	// BatchInputUSDPerMTok and BatchOutputUSDPerMTok price the lines of a
	// provider batch (pipelines with mode = "batch" or "auto"). Default:
	// half of InputUSDPerMTok and OutputUSDPerMTok, as OpenAI and
	// Anthropic both charge.
	BatchInputUSDPerMTok  float64 `toml:"batch_input_usd_per_mtok"`
	BatchOutputUSDPerMTok float64 `toml:"batch_output_usd_per_mtok"`
}

// Pipeline is one [[pipelines]] entry: how a record becomes a request and what
// the answer must look like.
type Pipeline struct {
	// Name identifies the pipeline (triage enqueue --pipeline). Required, unique.
	Name string `toml:"name"`
	// Model names the [[models]] entry to call. Required.
	Model string `toml:"model"`
	// System is the system prompt. Default "": none.
	System string `toml:"system"`
	// Prompt is a text/template over the record's fields, with a json function:
	// "Record: {{json .}}". Required. Render executes it.
	Prompt string `toml:"prompt"`
	// Output is json, json_schema or text. Default OutputDefault (json).
	Output Output `toml:"output"`
	// SchemaFile, with output = "json_schema", is the JSON Schema file the
	// answer must follow (relative to triage.toml's folder): sent in the
	// vendor's structured-output form and checked on every answer (see
	// OutputJSONSchema). Required with json_schema, refused without.
	SchemaFile string `toml:"schema_file"`
	// Schema is the schema's text, read from SchemaFile by Load and Parse
	// (set it directly in a Config built in Go). Validate compacts it.
	Schema json.RawMessage `toml:"-"`
	// SchemaStrict is OpenAI's json_schema.strict: the vendor holds the
	// answer to the schema, and refuses a schema outside its strict subset
	// (every property required, additionalProperties false). Default nil:
	// true. See Strict.
	SchemaStrict *bool `toml:"schema_strict"`
	// MaxAttempts is River's max attempts per record. Default
	// MaxAttemptsDefault (6).
	MaxAttempts int `toml:"max_attempts"`
	// BudgetUSD pauses a batch of this pipeline when its spend reaches it.
	// Default 0: no per-batch cap.
	BudgetUSD float64 `toml:"budget_usd"`
	// MaxTokens is the output token cap per request. Default MaxTokensDefault
	// (1024).
	MaxTokens int `toml:"max_tokens"`
	// Temperature is sent when set. Default nil: the vendor's default.
	Temperature *float64 `toml:"temperature"`
	// AmbiguousRetries is how many times a call with an unknown outcome is
	// retried before dead letter. Default AmbiguousRetriesDefault (1) when
	// absent from the file; an explicit 0 in the file (never resend an
	// ambiguous call) is kept. In a Config built in Go, WithDefaults treats 0
	// as unset.
	AmbiguousRetries int `toml:"ambiguous_retries"`
	// MaxSnoozes is how many snoozes a job may take before it is dead-lettered
	// as snoozed_out. Written max_snoozes or snooze_limit in the file (not
	// both). Default MaxSnoozesDefault (100).
	MaxSnoozes int `toml:"max_snoozes"`

	// Response cache (see cache.go).
	//
	// Cache answers a request identical to one answered before (same
	// vendor, model, system, prompt and parameters; any batch) from the
	// stored answer, without a call. Default false: a pipeline whose
	// prompt asks for fresh or varied answers must not get yesterday's.
	Cache bool `toml:"cache"`
	// CacheTTL is how long a stored answer is used. Default CacheTTLDefault
	// (30 days). Written like "720h" or "30d".
	CacheTTL time.Duration `toml:"cache_ttl"`
	// OnOverflow is what a context-length rejection leads to: OverflowDeadLetter
	// or OverflowTruncate (one retry with the record's longest strings
	// shortened to fit). Default OnOverflowDefault (dead_letter): data is
	// never changed silently.
	OnOverflow Overflow `toml:"on_overflow"`
	// Streaming (stream.go).
	//
	// Stream sends streaming requests (server-sent events), so that a cut
	// generation leaves its partial text behind. Default false.
	Stream bool `toml:"stream"`
	// StreamIdleTimeout cuts a stream that sends nothing for this long, so a
	// stalled generation ends early instead of at the key's timeout. Default
	// StreamIdleTimeoutDefault (30s) when Stream is set, or half the key's
	// timeout when that is shorter; it must be shorter than the key's timeout.
	StreamIdleTimeout time.Duration `toml:"stream_idle_timeout"`
	// StreamMax is the ceiling of one streamed call: with Stream, the
	// key's timeout bounds only the wait for the stream to start, and a
	// stream that keeps delivering runs until it ends, is silent for
	// StreamIdleTimeout, or has run StreamMax since the send. Default
	// StreamMaxDefault (10m) when Stream is set, or the key's timeout when
	// that is longer; it must not be shorter than the key's timeout.
	StreamMax time.Duration `toml:"stream_max"`
	// AcceptPartialMinChars, on an output = "text" pipeline with Stream,
	// completes a record whose stream was cut once at least this many
	// characters arrived, marked partial. Default 0: a cut stream is never
	// accepted as the result.
	AcceptPartialMinChars int `toml:"accept_partial_min_chars"`
	// Fallback names the [[models]] a job may move to, in order, when its
	// transient attempts on Model are spent or Model's key has a breaker
	// open longer than FallbackGrace; only a capable one is taken (it fits
	// the request and supports Output). Default none.
	Fallback []string `toml:"fallback"`
	// FallbackMaxShare bounds the share of a batch's records that may move
	// to a fallback (0.2: at most a fifth). Default 0: no bound, because a
	// fallback listed is one the pipeline's owner chose to pay for.
	FallbackMaxShare float64 `toml:"fallback_max_share"`
	// FallbackGrace is how long a key's breaker must have been open before
	// its queued jobs move to a fallback. Default FallbackGraceDefault
	// (30s).
	FallbackGrace time.Duration `toml:"-"`
	// Mode is how records reach the model (batch.go): ModeSync, ModeBatch
	// or ModeAuto. Default ModeDefault (sync).
	Mode Mode `toml:"mode"`
	// AutoMargin, with mode = "auto": once the batch's deadline is nearer
	// than this, what is left runs synchronously and open provider batches
	// are cancelled. Default AutoMarginDefault (3h).
	AutoMargin time.Duration `toml:"auto_margin"`
	// Deadline is when a batch of this pipeline must be done: "06:00" (the
	// next such local time after enqueue) or a duration from enqueue
	// ("8h"). Stored with the batch when it is enqueued; `triage run
	// --deadline` overrides it. Default none.
	Deadline Deadline `toml:"-"`

	ambiguousRetriesSet bool
	tmpl                *template.Template
	// schema is Schema compiled by Validate (CheckSchema).
	schema *jsonschema.Schema
}
