package decide

import (
	"slices"
	"time"

	"github.com/triage-dev/triage/worker/config"
)

// FallbackFacts is what the decisions know about moving a job elsewhere.
type FallbackFacts struct {
	// Model is the first capable fallback after the job's current model
	// (FirstCapable), nil when none is (or the pipeline lists none).
	Model *config.Model
	// OpenFor is how long the key's open breaker has been open; nil when
	// not known (the per-job path does not read it: the mover does).
	OpenFor *time.Duration
	// Grace is the pipeline's fallback_grace.
	Grace time.Duration
}

// ready: the key's breaker has been open past the grace and a capable
// fallback exists.
func (f FallbackFacts) ready() bool {
	return f.Model != nil && f.OpenFor != nil && *f.OpenFor >= f.Grace
}

// FallbackMove is a ReactFallback's payload: where to, and what to do if the
// batch's fallback_max_share refuses the move.
type FallbackMove struct {
	Model     *config.Model
	Otherwise Reaction
}

func fallback(m *config.Model, otherwise Reaction) Reaction {
	return Reaction{Kind: ReactFallback, Fallback: &FallbackMove{Model: m, Otherwise: otherwise}}
}

// Need is what a rendered request asks of a model: its estimated input
// tokens, its max_tokens, and JSON mode.
type Need struct {
	InputTokens, MaxTokens int
	JSON                   bool
}

// Capable reports whether model m can serve a request that needs n: the
// prompt and max_tokens fit its context window, max_tokens fits its output
// limit, and a JSON request needs json_mode. Unknown limits (0) are not
// checked.
func Capable(m *config.Model, n Need) bool {
	if m.ContextTokens > 0 && n.InputTokens+n.MaxTokens > m.ContextTokens {
		return false
	}
	if m.MaxOutputTokens > 0 && n.MaxTokens > m.MaxOutputTokens {
		return false
	}
	return !n.JSON || m.JSONMode
}

// FirstCapable is the first of the pipeline's fallbacks after the job's
// current model that can serve n; nil if none. A job never moves back to
// its primary, nor to a fallback before the one it is on.
func FirstCapable(cfg *config.Config, p *config.Pipeline, current string, n Need) *config.Model {
	names := p.Fallback
	if i := slices.Index(names, current); i >= 0 {
		names = names[i+1:]
	}
	for _, name := range names {
		if m, err := cfg.Model(name); err == nil && Capable(m, n) {
			return m
		}
	}
	return nil
}
