package config

import "time"

// StreamIdleTimeoutDefault is Pipeline.StreamIdleTimeout's default. A healthy
// stream sends a chunk every few tens of milliseconds once its headers are
// in (Anthropic pings in between), so half a minute of silence is a stall,
// not a slow model; it is also half the key timeout's default, so a stall is
// cut well before the whole call's deadline.
const StreamIdleTimeoutDefault = 30 * time.Second

// streamDefaults fills StreamIdleTimeout: StreamIdleTimeoutDefault, but at
// most half the key's call timeout, so that the default always cuts a stall
// before the call's own deadline would.
func (p *Pipeline) streamDefaults(keyTimeout time.Duration) {
	if p.Stream && p.StreamIdleTimeout == 0 {
		p.StreamIdleTimeout = StreamIdleTimeoutDefault
		if keyTimeout > 0 {
			p.StreamIdleTimeout = min(p.StreamIdleTimeout, keyTimeout/2)
		}
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
