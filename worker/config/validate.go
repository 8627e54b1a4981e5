package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/triage-dev/triage/classify"
)

// KeyNameMaxLen is the longest [[keys]] name. Key names become River queue
// names (at most 64 characters), so this leaves room for a prefix.
const KeyNameMaxLen = 48

var (
	// keyNameRE is River's queue name rule: lower-case letters and digits,
	// separated by single underscores or hyphens.
	keyNameRE = regexp.MustCompile(`^[a-z0-9]+(?:[_-]?[a-z0-9]+)*$`)
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// WithDefaults returns a copy of c with every unset field set to its default
// (the XxxDefault constants). For Key.RetryBudget and
// Pipeline.AmbiguousRetries, where 0 is a meaningful setting, a 0 read from
// the file is kept; a 0 in a Config built in Go is filled in. Calling it twice
// is harmless.
func (c *Config) WithDefaults() *Config {
	out := *c
	if out.name == "" {
		out.name = "triage.toml"
	}
	out.Keys = slices.Clone(c.Keys)
	out.Models = slices.Clone(c.Models)
	out.Pipelines = slices.Clone(c.Pipelines)
	out.Rules = slices.Clone(c.Rules)
	for i := range out.Keys {
		k := &out.Keys[i]
		if k.Path == "" {
			k.Path = PathDefault
		}
		if k.Concurrency == 0 {
			k.Concurrency = ConcurrencyDefault
		}
		if k.Timeout == 0 {
			k.Timeout = TimeoutDefault
		}
		if k.ProbeInterval == 0 {
			k.ProbeInterval = ProbeIntervalDefault
		}
		if k.FetchCooldown == 0 {
			k.FetchCooldown = FetchCooldownFor(k.Concurrency)
		}
		if k.RetryBudget == 0 && !k.retryBudgetSet {
			k.RetryBudget = RetryBudgetDefault
		}
		k.retryBudgetSet = true
		if k.Ambiguous == "" {
			k.Ambiguous = AmbiguousDefault
		}
		if k.LookupWait == 0 {
			k.LookupWait = LookupWaitDefault
		}
	}
	for i := range out.Models {
		out.Models[i].batchDefaults()
	}
	for i := range out.Pipelines {
		p := &out.Pipelines[i]
		p.batchDefaults()
		if p.Output == "" {
			p.Output = OutputDefault
		}
		if p.MaxAttempts == 0 {
			p.MaxAttempts = MaxAttemptsDefault
		}
		if p.MaxTokens == 0 {
			p.MaxTokens = MaxTokensDefault
		}
		if p.AmbiguousRetries == 0 && !p.ambiguousRetriesSet {
			p.AmbiguousRetries = AmbiguousRetriesDefault
		}
		p.ambiguousRetriesSet = true
		if p.MaxSnoozes == 0 {
			p.MaxSnoozes = MaxSnoozesDefault
		}
		p.cacheDefaults()
		p.overflowDefaults()
		p.streamDefaults(out.keyTimeoutOf(p))
		if p.FallbackGrace == 0 {
			p.FallbackGrace = FallbackGraceDefault
		}
	}
	out.Retention.defaults()
	return &out
}

// Validate checks every field and every cross-reference and returns all
// problems, one per line, each naming the file, the element and the field:
//
//	triage.toml: pipelines[1] "enrich": model "gpt-5" is not defined in [[models]]
//
// Call it on a Config with defaults filled (WithDefaults): a zero where a
// default belongs is reported as invalid. Validate also compiles the pipeline
// prompt templates that Render uses; it is not safe to call concurrently with
// Render.
func (c *Config) Validate() error {
	v := validator{file: c.fileName()}

	if u := c.Database.URL; u != "" && strings.Contains(u, "://") {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "postgres" && pu.Scheme != "postgresql") {
			v.addf("database", "url must be a postgres:// or postgresql:// URL")
		}
	}
	if u := c.Alerts.WebhookURL; u != "" && !isHTTPURL(u) {
		v.addf("alerts", "webhook_url %q must be an http or https URL with a host", redactURL(u))
	}
	if x := c.Alerts.MaxUSDPerHour; !finiteNonNeg(x) {
		v.addf("alerts", "max_usd_per_hour must be 0 (off) or positive, got %v", x)
	}

	c.Retention.validate(&v)

	keys := map[string]int{}
	for i, k := range c.Keys {
		at := elem("keys", i, k.Name)
		switch {
		case k.Name == "":
			v.addf(at, "name is required")
		case len(k.Name) > KeyNameMaxLen || !keyNameRE.MatchString(k.Name):
			v.addf(at, "name must be lower-case letters and digits separated by single _ or - (at most %d characters): it names a River queue", KeyNameMaxLen)
		default:
			if j, dup := keys[k.Name]; dup {
				v.addf(at, "name duplicates keys[%d]", j)
			} else {
				keys[k.Name] = i
			}
		}
		switch {
		case k.Vendor == "":
			v.addf(at, "vendor is required, one of: %s", strings.Join(vendors, ", "))
		case !slices.Contains(vendors, k.Vendor):
			v.addf(at, "vendor %q is not one of: %s", k.Vendor, strings.Join(vendors, ", "))
		}
		if msg := k.Format.check(k.Vendor); msg != "" {
			v.addf(at, "%s", msg)
		}
		if k.Background && k.Format != FormatResponses {
			v.addf(at, "background = true is the Responses API's background mode: it needs format = \"responses\"")
		}
		switch k.Path {
		case classify.PathDirect, classify.PathRouter, classify.PathGateway:
		default:
			v.addf(at, "path %q is not one of: direct, router, gateway", k.Path)
		}
		switch {
		case k.BaseURL == "":
			v.addf(at, "base_url is required")
		case !isHTTPURL(k.BaseURL):
			v.addf(at, "base_url %q must be an http or https URL with a host", redactURL(k.BaseURL))
		}
		switch {
		case k.APIKeyEnv == "":
			v.addf(at, "api_key_env is required: the name of the environment variable holding the API key")
		case !envNameRE.MatchString(k.APIKeyEnv):
			v.addf(at, "api_key_env must name an environment variable (letters, digits, _), not hold the key itself")
		}
		switch {
		case !k.Ambiguous.valid():
			v.addf(at, "ambiguous %q is not one of: retry, dead_letter, lookup", k.Ambiguous)
		case k.Ambiguous == AmbiguousLookup && !slices.Contains(lookupVendors, k.Vendor):
			v.addf(at, "ambiguous = \"lookup\" needs a vendor that can find a call by its idempotency key (%s); vendor %q has no look-up: use \"retry\" or \"dead_letter\"",
				strings.Join(lookupVendors, ", "), k.Vendor)
		case k.Ambiguous == AmbiguousLookup && k.Format == FormatResponses:
			v.addf(at, "ambiguous = \"lookup\" finds stored chat completions; format = \"responses\" has no look-up by metadata: use \"retry\" or \"dead_letter\"")
		}
		if k.LookupWait < 0 {
			v.addf(at, "lookup_wait must be positive, got %s", k.LookupWait)
		}
		if k.Concurrency < 1 {
			v.addf(at, "concurrency must be at least 1, got %d", k.Concurrency)
		}
		if k.RPM < 0 {
			v.addf(at, "rpm must be positive, got %d", k.RPM)
		}
		if k.TPM < 0 {
			v.addf(at, "tpm must be positive, got %d", k.TPM)
		}
		if k.Timeout <= 0 {
			v.addf(at, "timeout must be positive, got %s", k.Timeout)
		}
		if k.FetchCooldown < FetchCooldownMin || k.FetchCooldown > FetchCooldownMax {
			v.addf(at, "fetch_cooldown must be between %s and %s, got %s", FetchCooldownMin, FetchCooldownMax, k.FetchCooldown)
		}
		if k.ProbeInterval <= 0 {
			v.addf(at, "probe_interval must be positive, got %s", k.ProbeInterval)
		}
		if !finiteNonNeg(k.PrepaidUSD) {
			v.addf(at, "prepaid_usd must be 0 (off) or positive, got %v", k.PrepaidUSD)
		}
		if !finiteNonNeg(k.RetryBudget) || k.RetryBudget > 1 {
			v.addf(at, "retry_budget must be between 0 and 1 (a share of first attempts), got %v", k.RetryBudget)
		}
		if k.StormShare > 1 || k.StormShare != k.StormShare {
			v.addf(at, "storm_share must be between 0 (off) and 1 (a share of calls), got %v", k.StormShare)
		}
		if k.StormFailures < -1 || k.StormMinCalls < 0 {
			v.addf(at, "storm_failures and storm_min_calls must not be negative")
		}
		if k.StormWindow < 0 || k.StormProbeMin < 0 || k.StormProbeMax < 0 {
			v.addf(at, "storm_window, storm_probe_min and storm_probe_max must not be negative, got %s, %s, %s",
				k.StormWindow, k.StormProbeMin, k.StormProbeMax)
		}
		for _, d := range []struct {
			name string
			v    time.Duration
		}{
			{"storm_alert_after", k.StormAlertAfter}, {"batch_gather", k.BatchGather},
			{"batch_poll_min", k.BatchPollMin}, {"batch_poll_max", k.BatchPollMax},
		} {
			if d.v < 0 {
				v.addf(at, "%s must not be negative, got %s (leave it out for the default)", d.name, d.v)
			}
		}
		if k.BatchPollMin > 0 && k.BatchPollMax > 0 && k.BatchPollMax < k.BatchPollMin {
			v.addf(at, "batch_poll_max (%s) must not be shorter than batch_poll_min (%s)", k.BatchPollMax, k.BatchPollMin)
		}
		if k.StormProbeMin > 0 && k.StormProbeMax > 0 && k.StormProbeMax < k.StormProbeMin {
			v.addf(at, "storm_probe_max (%s) must not be shorter than storm_probe_min (%s)", k.StormProbeMax, k.StormProbeMin)
		}
	}

	models := map[string]int{}
	for i, m := range c.Models {
		at := elem("models", i, m.Name)
		if m.Name == "" {
			v.addf(at, "name is required")
		} else if j, dup := models[m.Name]; dup {
			v.addf(at, "name duplicates models[%d]", j)
		} else {
			models[m.Name] = i
		}
		if m.Key == "" {
			v.addf(at, "key is required: the [[keys]] name that serves this model")
		} else if _, ok := keys[m.Key]; !ok {
			v.addf(at, "key %q is not defined in [[keys]]", m.Key)
		}
		if m.ContextTokens < 0 {
			v.addf(at, "context_tokens must be 0 (unknown) or positive, got %d", m.ContextTokens)
		}
		if !finiteNonNeg(m.InputUSDPerMTok) {
			v.addf(at, "input_usd_per_mtok must not be negative, got %v", m.InputUSDPerMTok)
		}
		if !finiteNonNeg(m.OutputUSDPerMTok) {
			v.addf(at, "output_usd_per_mtok must not be negative, got %v", m.OutputUSDPerMTok)
		}
		m.validateBatch(&v, at)
	}

	pipelines := map[string]int{}
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		at := elem("pipelines", i, p.Name)
		if p.Name == "" {
			v.addf(at, "name is required")
		} else if j, dup := pipelines[p.Name]; dup {
			v.addf(at, "name duplicates pipelines[%d]", j)
		} else {
			pipelines[p.Name] = i
		}
		if p.Model == "" {
			v.addf(at, "model is required: the [[models]] name to call")
		} else if j, ok := models[p.Model]; !ok {
			v.addf(at, "model %q is not defined in [[models]]", p.Model)
		} else if ct := c.Models[j].ContextTokens; ct > 0 && p.MaxTokens >= ct {
			v.addf(at, "max_tokens %d does not fit model %q's context of %d tokens", p.MaxTokens, p.Model, ct)
		} else if k, ok := keys[c.Models[j].Key]; ok && c.Keys[k].Responses() && p.MaxTokens >= 1 && p.MaxTokens < ResponsesMinOutputTokens {
			v.addf(at, "max_tokens %d is below the Responses API's minimum max_output_tokens of %d (model %q is on key %q, format = \"responses\")",
				p.MaxTokens, ResponsesMinOutputTokens, p.Model, c.Keys[k].Name)
		}
		if p.Prompt == "" {
			v.addf(at, "prompt is required")
		} else if t, err := p.parse(); err != nil {
			v.addf(at, "prompt is not a valid text/template: %v", err)
		} else {
			p.tmpl = t
		}
		switch p.Output {
		case OutputJSON, OutputJSONSchema, OutputText:
		default:
			v.addf(at, "output %q is not one of: json, json_schema, text", p.Output)
		}
		c.validateSchema(&v, at, p)
		if p.MaxAttempts < 1 {
			v.addf(at, "max_attempts must be at least 1, got %d", p.MaxAttempts)
		}
		if !finiteNonNeg(p.BudgetUSD) {
			v.addf(at, "budget_usd must be 0 (no cap) or positive, got %v", p.BudgetUSD)
		}
		if p.MaxTokens < 1 {
			v.addf(at, "max_tokens must be at least 1, got %d", p.MaxTokens)
		}
		if t := p.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 2) {
			v.addf(at, "temperature must be between 0 and 2, got %v", *t)
		}
		if p.AmbiguousRetries < 0 {
			v.addf(at, "ambiguous_retries must be 0 or more, got %d", p.AmbiguousRetries)
		}
		if p.MaxSnoozes < 1 {
			v.addf(at, "max_snoozes must be at least 1, got %d", p.MaxSnoozes)
		}
		p.validateCache(&v, at)
		p.validateOverflow(&v, at)
		p.validateStream(&v, at, c.keyTimeoutOf(p))
	}
	c.validateRules(&v)
	c.validateFallback(&v)
	c.validateBatch(&v)
	return v.err()
}

type validator struct {
	file string
	errs []error
}

func (v *validator) addf(at, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%s: %s: %s", v.file, at, fmt.Sprintf(format, args...)))
}

func (v *validator) err() error { return errors.Join(v.errs...) }

func (c *Config) fileName() string {
	if c.name == "" {
		return "triage.toml"
	}
	return c.name
}

func finiteNonNeg(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) && x >= 0 }

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// redactURL drops userinfo and query from a URL for error messages: webhook
// and gateway URLs sometimes carry tokens.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	u.Fragment = ""
	return u.String()
}
