package workertest

import (
	"fmt"
	"strings"
)

// Names used by the configuration Config writes.
const (
	// Key is the name of the configuration's one key.
	Key = "main"
	// Pipeline is the name of the configuration's one pipeline.
	Pipeline = "enrich"
	// APIKeyEnv is the environment variable the key's API key is read from.
	APIKeyEnv = "FAKE_API_KEY"
	// APIKey is the API key WorkerOptions' Getenv returns for APIKeyEnv. Give
	// it to the fake provider's Scenario.APIKey.
	APIKey = "sk-test-secret"
)

// Defaults for ConfigOptions: fast enough for tests, the same in every test
// world.
const (
	VendorDefault        = "openai"
	ConcurrencyDefault   = 4
	TimeoutDefault       = "5s"
	ProbeIntervalDefault = "500ms"
)

// ConfigOptions are the knobs of Config. Zero values take the defaults
// stated on each field.
type ConfigOptions struct {
	// BaseURL is the provider's base URL, e.g. Provider's second result.
	// Required.
	BaseURL string
	// Vendor of the key. Default VendorDefault (openai).
	Vendor string
	// Concurrency of the key. Default ConcurrencyDefault (4).
	Concurrency int
	// Timeout of one call, a TOML duration string. Default TimeoutDefault
	// (5s).
	Timeout string
	// ProbeInterval of the key's breaker. Default ProbeIntervalDefault
	// (500ms).
	ProbeInterval string
	// MaxAttempts of the pipeline. Default 0: the line is left out, so the
	// configuration's own default applies (config.MaxAttemptsDefault) and a
	// test may still add the line itself.
	MaxAttempts int
	// Output of the pipeline ("json", "json_schema" with a schema_file line in
	// ExtraPipeline, or "text"). Default "": the line is left
	// out (config.OutputDefault applies).
	Output string
	// WebhookURL of the [alerts] table, e.g. a Webhook's server. Default "":
	// no webhook line.
	WebhookURL string
	// ExtraAlerts are lines added to the [alerts] table (each ending in a
	// newline). The table is written only when WebhookURL or ExtraAlerts is
	// set.
	ExtraAlerts string
	// ExtraKey are lines added to the key's table.
	ExtraKey string
	// ExtraPipeline are lines added to the pipeline's table. It ends the
	// file, so they may also open further tables.
	ExtraPipeline string
}

// Config returns the text of a triage.toml with one key (Key) of the given
// vendor at opts.BaseURL, whose API key is read from APIKeyEnv, one model
// ("fake-model") and one pipeline (Pipeline) that enriches a record with a
// JSON object.
func Config(opts ConfigOptions) string {
	if opts.Vendor == "" {
		opts.Vendor = VendorDefault
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = ConcurrencyDefault
	}
	if opts.Timeout == "" {
		opts.Timeout = TimeoutDefault
	}
	if opts.ProbeInterval == "" {
		opts.ProbeInterval = ProbeIntervalDefault
	}
	var b strings.Builder
	if opts.WebhookURL != "" || opts.ExtraAlerts != "" {
		b.WriteString("\n[alerts]\n")
		if opts.WebhookURL != "" {
			fmt.Fprintf(&b, "webhook_url = %q\n", opts.WebhookURL)
		}
		b.WriteString(opts.ExtraAlerts)
	}
	fmt.Fprintf(&b, `
[[keys]]
name = %q
vendor = %q
base_url = %q
api_key_env = %q
concurrency = %d
timeout = %q
probe_interval = %q
%s
[[models]]
name = "fake-model"
key = %q
input_usd_per_mtok = 0.15
output_usd_per_mtok = 0.60

[[pipelines]]
name = %q
model = "fake-model"
system = "You add fields to records. Answer with one JSON object."
prompt = "Record: {{json .}}"
`, Key, opts.Vendor, opts.BaseURL, APIKeyEnv, opts.Concurrency, opts.Timeout, opts.ProbeInterval, opts.ExtraKey, Key, Pipeline)
	if opts.Output != "" {
		fmt.Fprintf(&b, "output = %q\n", opts.Output)
	}
	if opts.MaxAttempts != 0 {
		fmt.Fprintf(&b, "max_attempts = %d\n", opts.MaxAttempts)
	}
	b.WriteString(opts.ExtraPipeline)
	return b.String()
}
