package fakeprovider

import (
	"math"
	"time"
)

// bucket is two token buckets (requests and tokens) per minute on the injected
// clock, refilled continuously as the vendors describe theirs.
type bucket struct {
	rpm, tpm float64
	// reqCap and tokCap are the buckets' sizes (a minute's worth by default).
	reqCap, tokCap float64
	req, tok       float64
	last           time.Time
	noHeaders      bool
}

func newBucket(rl *RateLimit, now time.Time) *bucket {
	if rl == nil || (rl.RequestsPerMinute == 0 && rl.TokensPerMinute == 0) {
		return nil
	}
	b := &bucket{rpm: float64(rl.RequestsPerMinute), tpm: float64(rl.TokensPerMinute), last: now, noHeaders: rl.NoHeaders}
	b.reqCap, b.tokCap = b.rpm, b.tpm
	if rl.BurstRequests > 0 && b.rpm > 0 {
		b.reqCap = math.Min(b.rpm, float64(rl.BurstRequests))
	}
	if rl.BurstTokens > 0 && b.tpm > 0 {
		b.tokCap = math.Min(b.tpm, float64(rl.BurstTokens))
	}
	b.req, b.tok = b.reqCap, b.tokCap
	return b
}

func (b *bucket) refill(now time.Time) {
	dt := now.Sub(b.last).Minutes()
	if dt <= 0 {
		return
	}
	b.last = now
	if b.rpm > 0 {
		b.req = math.Min(b.reqCap, b.req+dt*b.rpm)
	}
	if b.tpm > 0 {
		b.tok = math.Min(b.tokCap, b.tok+dt*b.tpm)
	}
}

// limitHit describes which bucket refused a request, for the vendor's message.
type limitHit struct {
	kind      string // "requests" or "tokens"
	limit     int
	used      int
	requested int
	wait      time.Duration
}

// take admits a request costing tokens or says which limit it hit and how long
// until it would pass; tooLarge means it never can.
func (b *bucket) take(now time.Time, tokens int) (hit *limitHit, tooLarge bool) {
	b.refill(now)
	if b.tpm > 0 && float64(tokens) > b.tokCap {
		return &limitHit{kind: "tokens", limit: int(b.tpm), requested: tokens}, true
	}
	var wait time.Duration
	kind := ""
	if b.rpm > 0 && b.req < 1 {
		wait = minutes((1 - b.req) / b.rpm)
		kind = "requests"
	}
	if b.tpm > 0 && b.tok < float64(tokens) {
		if w := minutes((float64(tokens) - b.tok) / b.tpm); w > wait {
			wait, kind = w, "tokens"
		}
	}
	if kind != "" {
		h := &limitHit{kind: kind, wait: wait, requested: 1}
		if kind == "requests" {
			h.limit, h.used = int(b.rpm), int(b.rpm-b.req)
		} else {
			h.limit, h.used, h.requested = int(b.tpm), int(b.tpm-b.tok), tokens
		}
		return h, false
	}
	if b.rpm > 0 {
		b.req--
	}
	if b.tpm > 0 {
		b.tok -= float64(tokens)
	}
	return nil, false
}

// rateHeaders is a snapshot of the buckets for the x-ratelimit-* and
// anthropic-ratelimit-* headers.
// Limits are per minute; remaining is what the bucket holds; reset is the
// time until the bucket is full again ("resets to its initial state", in
// OpenAI's words).
type rateHeaders struct {
	rpm, tpm           int
	reqLeft, tokLeft   int
	reqReset, tokReset time.Duration
	now                time.Time
	// hidden: the scenario sends no rate-limit headers (the message text
	// still names the limit, as the vendors' bodies do).
	hidden bool
}

func (b *bucket) snapshot(now time.Time) *rateHeaders {
	b.refill(now)
	h := &rateHeaders{rpm: int(b.rpm), tpm: int(b.tpm), reqLeft: int(b.req), tokLeft: int(b.tok), now: now, hidden: b.noHeaders}
	if b.rpm > 0 {
		h.reqReset = minutes((b.reqCap - b.req) / b.rpm)
	}
	if b.tpm > 0 {
		h.tokReset = minutes((b.tokCap - b.tok) / b.tpm)
	}
	return h
}

func minutes(m float64) time.Duration {
	return time.Duration(math.Ceil(m*float64(time.Minute)/float64(time.Millisecond))) * time.Millisecond
}
