package provider

import (
	"strconv"
	"strings"
	"time"
)

// RateWindow is one limit a response's rate-limit headers describe.
type RateWindow struct {
	// Limit is how many requests (or tokens) the window allows; 0: not told.
	Limit int64 `json:"limit,omitempty"`
	// Remaining is how many are left; -1: not told.
	Remaining int64 `json:"remaining"`
	// Reset is how long until the window is back to its initial state
	// (full); 0: not told.
	Reset time.Duration `json:"reset,omitempty"`
	// Per is the period Limit counts over: a minute for every vendor here,
	// except Groq's request limit, which is per day.
	Per time.Duration `json:"per,omitempty"`
}

// Known reports whether the header gave a limit.
func (w RateWindow) Known() bool { return w.Limit > 0 && w.Per > 0 }

// PerSecond is the limit as a steady rate; 0 when unknown.
func (w RateWindow) PerSecond() float64 {
	if !w.Known() {
		return 0
	}
	return float64(w.Limit) / w.Per.Seconds()
}

// Empty reports that the window is known to be used up: no requests (or
// tokens) remain.
func (w RateWindow) Empty() bool { return w.Known() && w.Remaining == 0 }

// RateLimit is the rate-limit state one response's headers told, successes
// included. Each window is zero (Limit 0, Remaining -1) when its headers
// were absent or unreadable.
type RateLimit struct {
	Requests RateWindow `json:"requests"`
	// Tokens is the combined token limit (OpenAI's TPM; Anthropic's most
	// restrictive token limit).
	Tokens RateWindow `json:"tokens"`
	// InputTokens and OutputTokens are Anthropic's ITPM and OTPM.
	InputTokens  RateWindow `json:"input_tokens"`
	OutputTokens RateWindow `json:"output_tokens"`
}

// Known reports whether any limit was told.
func (r RateLimit) Known() bool {
	return r.Requests.Known() || r.Tokens.Known() || r.InputTokens.Known() || r.OutputTokens.Known()
}

// TokenWindow is the token limit that binds the input a request sends:
// Anthropic's input-token limit when told, else the combined one.
func (r RateLimit) TokenWindow() RateWindow {
	if r.InputTokens.Known() && (!r.Tokens.Known() || r.InputTokens.PerSecond() < r.Tokens.PerSecond()) {
		return r.InputTokens
	}
	return r.Tokens
}

// ParseRateLimit reads a response's rate-limit headers (names lower-cased,
// as in Observation.Headers). It is pure: now is the time the response
// arrived, used to turn Anthropic's reset instants into durations.
//
// Formats, from the vendors' documentation:
//   - OpenAI (platform.openai.com/docs/guides/rate-limits, "Rate limits in
//     headers"), and Azure OpenAI and Groq, which use the same family:
//     x-ratelimit-{limit,remaining,reset}-{requests,tokens}. Limit and
//     remaining are integers; reset is a duration in Go's notation ("1s",
//     "6m0s", "20ms", "1.5s"; Groq: "2m59.56s", "7.66s"). Limits are per
//     minute, except Groq's request limit, which is requests per day
//     (console.groq.com/docs/rate-limits). Azure may send -1 for "unknown".
//   - Anthropic (docs.claude.com/en/api/rate-limits, "Response headers"):
//     anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
//     {limit,remaining,reset}. Reset is an RFC 3339 instant
//     ("2025-01-15T14:24:00Z"). Limits are per minute.
//
// A header that does not parse is ignored (its window stays unknown): a
// quirky proxy must not stop pacing, nor fail the call.
func ParseRateLimit(vendor string, h map[string]string, now time.Time) RateLimit {
	rl := RateLimit{Requests: unknownWindow(), Tokens: unknownWindow(), InputTokens: unknownWindow(), OutputTokens: unknownWindow()}
	if len(h) == 0 {
		return rl
	}
	if vendor == "anthropic" {
		rl.Requests = anthropicWindow(h, "requests", now)
		rl.Tokens = anthropicWindow(h, "tokens", now)
		rl.InputTokens = anthropicWindow(h, "input-tokens", now)
		rl.OutputTokens = anthropicWindow(h, "output-tokens", now)
		return rl
	}
	reqPer := time.Minute
	if vendor == "groq" {
		reqPer = 24 * time.Hour
	}
	rl.Requests = openAIWindow(h, "requests", reqPer)
	rl.Tokens = openAIWindow(h, "tokens", time.Minute)
	return rl
}

func unknownWindow() RateWindow { return RateWindow{Remaining: -1} }

func openAIWindow(h map[string]string, kind string, per time.Duration) RateWindow {
	w := unknownWindow()
	limit, ok := count(h["x-ratelimit-limit-"+kind])
	if !ok || limit <= 0 {
		return w
	}
	w.Limit, w.Per = limit, per
	if rem, ok := count(h["x-ratelimit-remaining-"+kind]); ok && rem >= 0 {
		w.Remaining = rem
	}
	if d, ok := resetDuration(h["x-ratelimit-reset-"+kind]); ok {
		w.Reset = d
	}
	return w
}

func anthropicWindow(h map[string]string, kind string, now time.Time) RateWindow {
	w := unknownWindow()
	limit, ok := count(h["anthropic-ratelimit-"+kind+"-limit"])
	if !ok || limit <= 0 {
		return w
	}
	w.Limit, w.Per = limit, time.Minute
	if rem, ok := count(h["anthropic-ratelimit-"+kind+"-remaining"]); ok && rem >= 0 {
		w.Remaining = rem
	}
	if t, err := time.Parse(time.RFC3339, strings.TrimSpace(h["anthropic-ratelimit-"+kind+"-reset"])); err == nil {
		w.Reset = max(0, t.Sub(now))
	}
	return w
}

func count(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// resetDuration reads OpenAI's reset: a Go duration ("6m0s", "1.5s",
// "20ms"); a bare number is taken as seconds (Azure's integer seconds).
func resetDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return d, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 && f < 1e9 {
		return time.Duration(f * float64(time.Second)), true
	}
	return 0, false
}
