package config

import (
	"slices"
	"time"
)

// validateFallback checks the pipelines' fallback settings and the models'
// capability table: every fallback names a model, not the pipeline's own
// nor twice, and one that can serve the pipeline's output (a JSON pipeline
// needs a json_mode model); the share is a fraction; the capabilities are
// not negative.
func (c *Config) validateFallback(v *validator) {
	for i, m := range c.Models {
		if m.MaxOutputTokens < 0 {
			v.addf(elem("models", i, m.Name), "max_output_tokens must be 0 (unknown) or positive, got %d", m.MaxOutputTokens)
		}
	}
	for i, p := range c.Pipelines {
		at := elem("pipelines", i, p.Name)
		for j, name := range p.Fallback {
			switch {
			case name == p.Model:
				v.addf(at, "fallback %q is the pipeline's own model", name)
			case slices.Index(p.Fallback, name) != j:
				v.addf(at, "fallback %q is listed twice", name)
			case !slices.ContainsFunc(c.Models, func(m Model) bool { return m.Name == name }):
				v.addf(at, "fallback %q is not a [[models]] name", name)
			case p.Output == OutputJSON && !c.Models[slices.IndexFunc(c.Models, func(m Model) bool { return m.Name == name })].JSONMode:
				// A fallback is taken only by a request it can serve: this
				// one could serve none, and the jobs of an exhausted key
				// would wait on it, silently, for ever.
				v.addf(at, "fallback %q can serve no record of an output = \"json\" pipeline: set json_mode = true on [[models]] %q if it supports the vendor's JSON mode, or remove it from fallback", name, name)
			case p.Output == OutputJSONSchema && !c.Models[slices.IndexFunc(c.Models, func(m Model) bool { return m.Name == name })].JSONMode:
				v.addf(at, "fallback %q can serve no record of an output = \"json_schema\" pipeline: set json_mode = true on [[models]] %q if it supports the vendor's structured output, or remove it from fallback", name, name)
			case p.Output == OutputJSONSchema && schemaRefusedFor(c, name) != "":
				v.addf(at, "fallback %q cannot take output = \"json_schema\": %s", name, schemaRefusedFor(c, name))
			}
		}
		if x := p.FallbackMaxShare; !finiteNonNeg(x) || x > 1 {
			v.addf(at, "fallback_max_share must be between 0 (no bound) and 1, got %v", x)
		}
		if p.FallbackGrace < 0 || (p.FallbackGrace > 0 && p.FallbackGrace < time.Millisecond) {
			v.addf(at, "fallback_grace must be a positive duration, got %s", p.FallbackGrace)
		}
	}
}

// schemaRefusedFor says why model name's key cannot carry a JSON Schema
// ("" if it can).
func schemaRefusedFor(c *Config, name string) string {
	m, err := c.Model(name)
	if err != nil {
		return ""
	}
	k, err := c.Key(m.Key)
	if err != nil {
		return ""
	}
	return schemaVendorsRefused[k.Vendor]
}

// Fallbacks returns the pipeline's fallback models in order (after
// Validate, every name resolves).
func (c *Config) Fallbacks(p *Pipeline) []*Model {
	out := make([]*Model, 0, len(p.Fallback))
	for _, name := range p.Fallback {
		if m, err := c.Model(name); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// FallbackKeys returns the keys of the pipeline's fallback models that are
// not the key of its own model, in order, each once: a process that runs
// the pipeline's batch must work them too.
func (c *Config) FallbackKeys(p *Pipeline) []string {
	own := ""
	if m, err := c.Model(p.Model); err == nil {
		own = m.Key
	}
	var out []string
	for _, m := range c.Fallbacks(p) {
		if m.Key != own && !slices.Contains(out, m.Key) {
			out = append(out, m.Key)
		}
	}
	return out
}
