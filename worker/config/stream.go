package config

import "time"

// StreamIdleTimeoutDefault is Pipeline.StreamIdleTimeout's default. A healthy
// stream sends a chunk every few tens of milliseconds once its headers are
// in (Anthropic pings in between), so half a minute of silence is a stall,
// not a slow model; it is also half the key timeout's default, so a stall is
// cut well before the whole call's deadline.
const StreamIdleTimeoutDefault = 30 * time.Second

func (p *Pipeline) streamDefaults() {
	if p.Stream && p.StreamIdleTimeout == 0 {
		p.StreamIdleTimeout = StreamIdleTimeoutDefault
	}
}

// validateStream checks the streaming options of one pipeline.
func (p *Pipeline) validateStream(v *validator, at string) {
	if p.StreamIdleTimeout < 0 {
		v.addf(at, "stream_idle_timeout must be positive, got %s", p.StreamIdleTimeout)
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
