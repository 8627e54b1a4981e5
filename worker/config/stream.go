package config

import (
	"slices"
	"time"
)

// StreamIdleTimeoutDefault is Pipeline.StreamIdleTimeout's default. A healthy
// stream sends a chunk every few tens of milliseconds once its headers are
// in (Anthropic pings in between), so half a minute of silence is a stall,
// not a slow model; it is also half the key timeout's default, so a stall is
// cut well before the whole call's deadline.
const StreamIdleTimeoutDefault = 30 * time.Second

// StreamMaxDefault is Pipeline.StreamMax's default: a generation that keeps
// streaming for ten minutes is not one a batch pipeline should wait on
// longer (max_tokens bounds it well before that at any model's speed).
const StreamMaxDefault = 10 * time.Minute

// streamDefaults fills StreamIdleTimeout: StreamIdleTimeoutDefault, but at
// most half the key's call timeout, so that the default always cuts a stall
// before the call's own deadline would; and StreamMax: StreamMaxDefault, or
// the key's timeout when that is longer.
func (p *Pipeline) streamDefaults(keyTimeout time.Duration) {
	if p.Stream && p.StreamIdleTimeout == 0 {
		p.StreamIdleTimeout = StreamIdleTimeoutDefault
		if keyTimeout > 0 {
			p.StreamIdleTimeout = min(p.StreamIdleTimeout, keyTimeout/2)
		}
	}
	if p.Stream && p.StreamMax == 0 {
		p.StreamMax = max(StreamMaxDefault, keyTimeout)
	}
}

// validateStream checks the streaming options of one pipeline; keyTimeout
// is the timeout of the key its model is served by (0: unknown).
func (p *Pipeline) validateStream(v *validator, at string, keyTimeout time.Duration) {
	if p.StreamIdleTimeout < 0 {
		v.addf(at, "stream_idle_timeout must be positive, got %s", p.StreamIdleTimeout)
	}
	if p.Stream && keyTimeout > 0 && p.StreamIdleTimeout >= keyTimeout {
		v.addf(at, "stream_idle_timeout %s must be shorter than the key's timeout %s, or it never cuts a stall", p.StreamIdleTimeout, keyTimeout)
	}
	if p.StreamIdleTimeout > 0 && !p.Stream {
		v.addf(at, "stream_idle_timeout needs stream = true")
	}
	if p.StreamMax < 0 {
		v.addf(at, "stream_max must be positive, got %s", p.StreamMax)
	}
	if p.StreamMax > 0 && !p.Stream {
		v.addf(at, "stream_max needs stream = true")
	}
	if p.Stream && keyTimeout > 0 && p.StreamMax > 0 && p.StreamMax < keyTimeout {
		v.addf(at, "stream_max %s must not be shorter than the key's timeout %s (the timeout bounds the wait for the stream to start)", p.StreamMax, keyTimeout)
	}
	if p.AcceptPartialMinChars < 0 {
		v.addf(at, "accept_partial_min_chars must be 0 (never accept a cut stream) or positive, got %d", p.AcceptPartialMinChars)
	}
	if p.AcceptPartialMinChars > 0 {
		if !p.Stream {
			v.addf(at, "accept_partial_min_chars needs stream = true: only a stream leaves a partial answer")
		}
		if p.Output != OutputText {
			v.addf(at, "accept_partial_min_chars needs output = \"text\": a cut JSON answer is not JSON")
		}
	}
}

// keyTimeoutOf is the call timeout of the key serving p's model; 0 when
// the model or key is not defined (reported elsewhere).
func (c *Config) keyTimeoutOf(p *Pipeline) time.Duration {
	for _, m := range c.Models {
		if m.Name != p.Model {
			continue
		}
		for _, k := range c.Keys {
			if k.Name == m.Key {
				return k.Timeout
			}
		}
	}
	return 0
}

// CallMax is the longest one call on key k may take: its timeout, or the
// StreamMax of a streaming pipeline whose model (or a fallback) k serves
// when that is longer. A job's run, the rescue horizon and the probe
// lease are sized on it.
func (c *Config) CallMax(k *Key) time.Duration {
	longest := k.Timeout
	onKey := func(model string) bool {
		for _, m := range c.Models {
			if m.Name == model {
				return m.Key == k.Name
			}
		}
		return false
	}
	for _, p := range c.Pipelines {
		if !p.Stream || p.StreamMax <= longest {
			continue
		}
		if onKey(p.Model) || slices.ContainsFunc(p.Fallback, onKey) {
			longest = p.StreamMax
		}
	}
	return longest
}
