package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/triage-dev/triage/classify"
)

// EnvDatabaseURL is the environment variable that overrides [database] url.
const EnvDatabaseURL = "DATABASE_URL"

// Load reads, parses and validates the file at path. Errors start with the
// file's base name ("triage.toml: ...").
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return parse(data, filepath.Base(path), filepath.Dir(path))
}

// Parse parses data as triage.toml, rejects unknown keys, fills defaults
// (WithDefaults) and validates (Validate). name is used as the prefix of every
// error message, e.g. "triage.toml".
// A pipeline's schema_file is read relative to the working directory.
func Parse(data []byte, name string) (*Config, error) { return parse(data, name, "") }

// parse is Parse with dir, the folder schema_file paths are relative to
// ("": the working directory).
func parse(data []byte, name, dir string) (*Config, error) {
	if name == "" {
		name = "triage.toml"
	}
	var raw rawFile
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, unknownKeys(name, data, und)
	}
	if err := raw.checkFormats(name, data); err != nil {
		return nil, err
	}
	cfg, err := raw.config(name)
	if err != nil {
		return nil, err
	}
	if err := raw.readSchemas(cfg, name, dir); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// rawFile mirrors the file; fields whose absence differs from zero are
// pointers, durations are strings so errors can name the field.
type rawFile struct {
	Database  Database      `toml:"database"`
	Alerts    Alerts        `toml:"alerts"`
	Keys      []rawKey      `toml:"keys"`
	Models    []Model       `toml:"models"`
	Pipelines []rawPipeline `toml:"pipelines"`
	Rules     []Rule        `toml:"rules"`
	Retention rawRetention  `toml:"retention"`
}

type rawKey struct {
	Name          string   `toml:"name"`
	Vendor        string   `toml:"vendor"`
	Path          string   `toml:"path"`
	Format        string   `toml:"format"`
	Background    bool     `toml:"background"`
	BaseURL       string   `toml:"base_url"`
	APIKeyEnv     string   `toml:"api_key_env"`
	Concurrency   *int     `toml:"concurrency"`
	Timeout       string   `toml:"timeout"`
	ProbeInterval string   `toml:"probe_interval"`
	FetchCooldown string   `toml:"fetch_cooldown"`
	PrepaidUSD    float64  `toml:"prepaid_usd"`
	RetryBudget   *float64 `toml:"retry_budget"`
	// IdempotentReplay: see Key.IdempotentReplay.
	IdempotentReplay bool `toml:"idempotent_replay"`
	// Ambiguous and LookupWait: see Key.Ambiguous.
	Ambiguous  string `toml:"ambiguous"`
	LookupWait string `toml:"lookup_wait"`
	// Storm breaker settings: see Key.StormFailures.
	StormFailures   *int     `toml:"storm_failures"`
	StormShare      *float64 `toml:"storm_share"`
	StormMinCalls   int      `toml:"storm_min_calls"`
	StormWindow     string   `toml:"storm_window"`
	StormProbeMin   string   `toml:"storm_probe_min"`
	StormProbeMax   string   `toml:"storm_probe_max"`
	StormAlertAfter string   `toml:"storm_alert_after"`
	// Safety net: see Key.SuspectRejections.
	SuspectRejections *int   `toml:"suspect_rejections"`
	ThrottleHoldAfter string `toml:"throttle_hold_after"`
	// Batch submitter timing: see Key.BatchGather.
	BatchGather  string `toml:"batch_gather"`
	BatchPollMin string `toml:"batch_poll_min"`
	BatchPollMax string `toml:"batch_poll_max"`
	// RPM and TPM: see Key.RPM.
	RPM *int `toml:"rpm"`
	TPM *int `toml:"tpm"`
}

type rawPipeline struct {
	Name             string   `toml:"name"`
	Model            string   `toml:"model"`
	System           string   `toml:"system"`
	Prompt           string   `toml:"prompt"`
	Output           string   `toml:"output"`
	SchemaFile       string   `toml:"schema_file"`
	SchemaStrict     *bool    `toml:"schema_strict"`
	MaxAttempts      *int     `toml:"max_attempts"`
	BudgetUSD        float64  `toml:"budget_usd"`
	MaxTokens        int      `toml:"max_tokens"`
	Temperature      *float64 `toml:"temperature"`
	AmbiguousRetries *int     `toml:"ambiguous_retries"`
	MaxSnoozes       *int     `toml:"max_snoozes"`
	SnoozeLimit      *int     `toml:"snooze_limit"`
	Cache            bool     `toml:"cache"`
	CacheTTL         string   `toml:"cache_ttl"`
	OnOverflow       string   `toml:"on_overflow"`
	// Streaming: see Pipeline.Stream.
	Stream                bool     `toml:"stream"`
	StreamIdleTimeout     string   `toml:"stream_idle_timeout"`
	StreamMax             string   `toml:"stream_max"`
	AcceptPartialMinChars int      `toml:"accept_partial_min_chars"`
	Fallback              []string `toml:"fallback"`
	FallbackMaxShare      float64  `toml:"fallback_max_share"`
	FallbackGrace         string   `toml:"fallback_grace"`
	// Batch API: see Pipeline.Mode.
	Mode       string `toml:"mode"`
	AutoMargin string `toml:"auto_margin"`
	// Deadline: see Pipeline.Deadline.
	Deadline string `toml:"deadline"`
}

func (r rawFile) config(name string) (*Config, error) {
	cfg := &Config{Database: r.Database, Alerts: r.Alerts, Models: r.Models, Rules: r.Rules, name: name}
	var err error
	if cfg.Retention, err = r.Retention.retention(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for i, rk := range r.Keys {
		k := Key{
			Name: rk.Name, Vendor: rk.Vendor, Path: classify.Path(rk.Path), Format: Format(rk.Format), Background: rk.Background, BaseURL: rk.BaseURL,
			APIKeyEnv: rk.APIKeyEnv, PrepaidUSD: rk.PrepaidUSD,
			IdempotentReplay: rk.IdempotentReplay, Ambiguous: Ambiguous(rk.Ambiguous),
		}
		// 0 written in the file is a mistake, not "the default": a key
		// that may run no call would queue forever.
		if rk.Concurrency != nil {
			if *rk.Concurrency < 1 {
				return nil, fmt.Errorf("%s: %s: concurrency must be at least 1, got %d", name, elem("keys", i, rk.Name), *rk.Concurrency)
			}
			k.Concurrency = *rk.Concurrency
		}
		var err error
		if k.Timeout, err = parseDuration(rk.Timeout); err != nil {
			return nil, fmt.Errorf("%s: %s: timeout %q: %w", name, elem("keys", i, rk.Name), rk.Timeout, err)
		}
		if k.ProbeInterval, err = parseDuration(rk.ProbeInterval); err != nil {
			return nil, fmt.Errorf("%s: %s: probe_interval %q: %w", name, elem("keys", i, rk.Name), rk.ProbeInterval, err)
		}
		for _, lim := range []struct {
			name string
			v    *int
			dst  *int
		}{{"rpm", rk.RPM, &k.RPM}, {"tpm", rk.TPM, &k.TPM}} {
			if lim.v == nil {
				continue
			}
			if *lim.v < 1 {
				return nil, fmt.Errorf("%s: %s: %s must be a positive number per minute (leave it out when the limit is unknown), got %d",
					name, elem("keys", i, rk.Name), lim.name, *lim.v)
			}
			*lim.dst = *lim.v
		}
		if rk.RetryBudget != nil {
			k.RetryBudget, k.retryBudgetSet = *rk.RetryBudget, true
		}
		if rk.StormFailures != nil {
			k.StormFailures = *rk.StormFailures
			if k.StormFailures == 0 {
				k.StormFailures = -1
			}
		}
		if rk.StormShare != nil {
			k.StormShare = *rk.StormShare
			if k.StormShare == 0 {
				k.StormShare = -1
			}
		}
		k.StormMinCalls = rk.StormMinCalls
		if rk.SuspectRejections != nil {
			switch n := *rk.SuspectRejections; {
			case n == 0:
				k.SuspectRejections = -1
			case n < 2:
				return nil, fmt.Errorf("%s: %s: suspect_rejections must be 0 (off) or at least 2 (one rejected record is the record's problem), got %d",
					name, elem("keys", i, rk.Name), n)
			default:
				k.SuspectRejections = n
			}
		}
		if rk.ThrottleHoldAfter != "" {
			d, err := time.ParseDuration(rk.ThrottleHoldAfter)
			switch {
			case err != nil:
				return nil, fmt.Errorf("%s: %s: throttle_hold_after %q: %w", name, elem("keys", i, rk.Name), rk.ThrottleHoldAfter, errDurationForm)
			case d < 0:
				return nil, fmt.Errorf("%s: %s: throttle_hold_after must be \"0s\" (off) or positive, got %q", name, elem("keys", i, rk.Name), rk.ThrottleHoldAfter)
			case d == 0:
				k.ThrottleHoldAfter = -1
			default:
				k.ThrottleHoldAfter = d
			}
		}
		for _, d := range []struct {
			name string
			raw  string
			dst  *time.Duration
		}{
			{"fetch_cooldown", rk.FetchCooldown, &k.FetchCooldown},
			{"storm_window", rk.StormWindow, &k.StormWindow},
			{"storm_probe_min", rk.StormProbeMin, &k.StormProbeMin},
			{"storm_probe_max", rk.StormProbeMax, &k.StormProbeMax},
			{"storm_alert_after", rk.StormAlertAfter, &k.StormAlertAfter},
			{"batch_gather", rk.BatchGather, &k.BatchGather},
			{"batch_poll_min", rk.BatchPollMin, &k.BatchPollMin},
			{"batch_poll_max", rk.BatchPollMax, &k.BatchPollMax},
			{"lookup_wait", rk.LookupWait, &k.LookupWait},
		} {
			if *d.dst, err = parseDuration(d.raw); err != nil {
				return nil, fmt.Errorf("%s: %s: %s %q: %w", name, elem("keys", i, rk.Name), d.name, d.raw, err)
			}
		}
		cfg.Keys = append(cfg.Keys, k)
	}
	for i, rp := range r.Pipelines {
		p := Pipeline{
			Name: rp.Name, Model: rp.Model, System: rp.System, Prompt: rp.Prompt,
			Output: Output(rp.Output), BudgetUSD: rp.BudgetUSD,
			SchemaFile: rp.SchemaFile, SchemaStrict: rp.SchemaStrict,
			MaxTokens: rp.MaxTokens, Temperature: rp.Temperature,
			OnOverflow: Overflow(rp.OnOverflow),
			Fallback:   rp.Fallback, FallbackMaxShare: rp.FallbackMaxShare,
		}
		var err error
		if p.FallbackGrace, err = parseDuration(rp.FallbackGrace); err != nil {
			return nil, fmt.Errorf("%s: %s: fallback_grace %q: %w", name, elem("pipelines", i, rp.Name), rp.FallbackGrace, err)
		}
		if rp.MaxAttempts != nil {
			if *rp.MaxAttempts < 1 {
				return nil, fmt.Errorf("%s: %s: max_attempts must be at least 1, got %d", name, elem("pipelines", i, rp.Name), *rp.MaxAttempts)
			}
			p.MaxAttempts = *rp.MaxAttempts
		}
		if rp.AmbiguousRetries != nil {
			p.AmbiguousRetries, p.ambiguousRetriesSet = *rp.AmbiguousRetries, true
		}
		switch {
		case rp.MaxSnoozes != nil && rp.SnoozeLimit != nil:
			return nil, fmt.Errorf("%s: %s: max_snoozes and snooze_limit are the same setting; keep one", name, elem("pipelines", i, rp.Name))
		case rp.MaxSnoozes != nil:
			p.MaxSnoozes = *rp.MaxSnoozes
		case rp.SnoozeLimit != nil:
			p.MaxSnoozes = *rp.SnoozeLimit
		}
		if (rp.MaxSnoozes != nil || rp.SnoozeLimit != nil) && p.MaxSnoozes <= 0 {
			field := "max_snoozes"
			if rp.SnoozeLimit != nil {
				field = "snooze_limit"
			}
			return nil, fmt.Errorf("%s: %s: %s must be at least 1, got %d", name, elem("pipelines", i, rp.Name), field, p.MaxSnoozes)
		}
		if err := rp.batchOptions(&p); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, elem("pipelines", i, rp.Name), err)
		}
		if err := rp.cacheOptions(&p); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, elem("pipelines", i, rp.Name), err)
		}
		if err := rp.deadlineOption(&p); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, elem("pipelines", i, rp.Name), err)
		}
		p.Stream, p.AcceptPartialMinChars = rp.Stream, rp.AcceptPartialMinChars
		if p.StreamIdleTimeout, err = parseDuration(rp.StreamIdleTimeout); err != nil {
			return nil, fmt.Errorf("%s: %s: stream_idle_timeout %q: %w", name, elem("pipelines", i, rp.Name), rp.StreamIdleTimeout, err)
		}
		if p.StreamMax, err = parseDuration(rp.StreamMax); err != nil {
			return nil, fmt.Errorf("%s: %s: stream_max %q: %w", name, elem("pipelines", i, rp.Name), rp.StreamMax, err)
		}
		cfg.Pipelines = append(cfg.Pipelines, p)
	}
	return cfg, nil
}

var errDurationForm = errors.New(`not a duration like "60s" or "1m30s"`)

// parseDuration parses a Go duration string; "" is zero (unset).
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errDurationForm
	}
	if d <= 0 {
		return 0, errors.New("must be positive")
	}
	return d, nil
}

// elem names an array-of-tables element in errors: `keys[0] "main"`.
func elem(table string, i int, name string) string {
	if name == "" {
		return fmt.Sprintf("%s[%d]", table, i)
	}
	return fmt.Sprintf("%s[%d] %q", table, i, name)
}

// unknownKeys reports keys the file has and Config does not, naming the
// [[keys]]/[[models]]/[[pipelines]] element they sit in where it can:
//
//	triage.toml: pipelines[1] "enrich": unknown key "temprature"
func unknownKeys(name string, data []byte, und []toml.Key) error {
	var generic map[string]any
	_, _ = toml.Decode(string(data), &generic) // decoded once already
	var errs []error
	seen := map[string]bool{}
	for _, k := range und {
		if len(k) == 2 {
			if elems, ok := generic[k[0]].([]map[string]any); ok {
				for i, e := range elems {
					if _, has := e[k[1]]; has {
						n, _ := e["name"].(string)
						msg := fmt.Sprintf("%s: %s: unknown key %q", name, elem(k[0], i, n), k[1])
						if !seen[msg] {
							seen[msg] = true
							errs = append(errs, errors.New(msg))
						}
					}
				}
				continue
			}
		}
		errs = append(errs, fmt.Errorf("%s: unknown key %q", name, k.String()))
	}
	return errors.Join(errs...)
}
