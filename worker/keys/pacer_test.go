package keys

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/worker/provider"
)

func TestThrottleScopeFor(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	empty := provider.ParseRateLimit("openai", map[string]string{
		"x-ratelimit-limit-requests": "1800", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2.5s",
	}, now)
	emptySoon := provider.ParseRateLimit("openai", map[string]string{
		"x-ratelimit-limit-requests": "1800", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "300ms",
	}, now)
	left := provider.ParseRateLimit("openai", map[string]string{
		"x-ratelimit-limit-requests": "1800", "x-ratelimit-remaining-requests": "12", "x-ratelimit-reset-requests": "2.5s",
	}, now)
	anthropicTokens := provider.ParseRateLimit("anthropic", map[string]string{
		"anthropic-ratelimit-input-tokens-limit": "30000", "anthropic-ratelimit-input-tokens-remaining": "0",
		"anthropic-ratelimit-input-tokens-reset": "2030-01-02T03:04:25Z",
	}, now)
	groqDay := provider.ParseRateLimit("groq", map[string]string{
		"x-ratelimit-limit-requests": "14400", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2m59.56s",
	}, now)
	tests := []struct {
		name       string
		retryAfter time.Duration
		rl         provider.RateLimit
		scope      ThrottleScope
		wait       time.Duration
	}{
		{"a short retry-after snoozes only the job", 800 * time.Millisecond, provider.RateLimit{}, ScopeJob, 800 * time.Millisecond},
		{"no hint at all", 0, provider.RateLimit{}, ScopeJob, 0},
		{"a few seconds is still the job's", 5 * time.Second, provider.RateLimit{}, ScopeJob, 5 * time.Second},
		{"a long retry-after pauses the key", 20 * time.Second, provider.RateLimit{}, ScopeKey, 20 * time.Second},
		{"remaining 0 with a reset pauses the key", 0, empty, ScopeKey, 2500 * time.Millisecond},
		{"retry-after names when the next passes", 1200 * time.Millisecond, empty, ScopeKey, 1200 * time.Millisecond},
		{"empty for a moment: held in the process", 0, emptySoon, ScopeHold, 300 * time.Millisecond},
		{"retry-after shorter than a second: held", 40 * time.Millisecond, empty, ScopeHold, 40 * time.Millisecond},
		{"requests left: only the job", 800 * time.Millisecond, left, ScopeJob, 800 * time.Millisecond},
		{"anthropic input tokens empty", 0, anthropicTokens, ScopeKey, 20 * time.Second},
		// Groq's request limit is per day: an empty day is a quota the
		// classifier sees in the body, not a pause the headers decide.
		{"a daily window does not decide", 2 * time.Second, groqDay, ScopeJob, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			scope, wait := ThrottleScopeFor(tt.retryAfter, tt.rl, 0, 0)
			require.Equal(t, tt.scope, scope)
			require.Equal(t, tt.wait, wait)
		})
	}
}

// simBucket is a provider's token bucket in virtual time.
type simBucket struct {
	rate, burst, level float64
}

func (b *simBucket) refill(dt float64) { b.level = math.Min(b.burst, b.level+dt*b.rate) }

func (b *simBucket) take() bool {
	if b.level >= 1 {
		b.level--
		return true
	}
	return false
}

// simulate drives a control against a provider bucket with demand always
// above the rate, in 5 ms steps, and returns the accepted share of the limit
// and the throttled share of requests after warm-up.
func simulate(t *testing.T, cfg PacerConfig, limit, burst float64, seconds float64, headers bool) (limitShare, throttledShare float64) {
	t.Helper()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newControl(cfg, now)
	b := &simBucket{rate: limit, burst: burst, level: burst}
	const step = 5 * time.Millisecond
	var credit float64
	var sent, accepted, throttled int
	var window [600]int // accepted per step over 3 s
	warm := 10.0
	for i := 0; float64(i)*step.Seconds() < seconds; i++ {
		now = now.Add(step)
		req, _ := c.fleetRates()
		credit = math.Min(credit+req*step.Seconds(), 2)
		window[i%len(window)] = 0
		for credit >= 1 {
			credit--
			ok := b.take()
			measure := float64(i)*step.Seconds() >= warm
			if measure {
				sent++
			}
			o := PaceOutcome{At: now, Answered: true, OK: ok, Throttled: !ok, Latency: 50 * time.Millisecond}
			if headers {
				o.RateLimit = provider.RateLimit{Requests: provider.RateWindow{Limit: int64(limit * 60), Remaining: int64(b.level), Per: time.Minute},
					Tokens: provider.RateWindow{Remaining: -1}, InputTokens: provider.RateWindow{Remaining: -1}, OutputTokens: provider.RateWindow{Remaining: -1}}
			}
			c.observe(o)
			if ok {
				window[i%len(window)]++
				if measure {
					accepted++
				}
			} else if measure {
				throttled++
			}
		}
		b.refill(step.Seconds())
		n := 0
		for _, v := range window {
			n += v
		}
		c.tick(now, true, float64(n)/math.Min(3, float64(i+1)*step.Seconds()))
	}
	return float64(accepted) / (limit * (seconds - warm)), float64(throttled) / float64(max(1, sent))
}

func TestControlConvergesWithoutHeaders(t *testing.T) {
	t.Parallel()
	for _, shape := range []struct{ limit, burst float64 }{{30, 15}, {100, 50}, {8, 2}} {
		share, thr := simulate(t, PacerConfig{Concurrency: 32}, shape.limit, shape.burst, 120, false)
		t.Logf("limit %g/s burst %g: limit share %.3f, throttled %.3f", shape.limit, shape.burst, share, thr)
		require.GreaterOrEqual(t, share, 0.9, "limit %g", shape.limit)
		require.LessOrEqual(t, share, 1.05, "limit %g", shape.limit)
		// Under ten requests a second each overshoot's round trip of
		// refusals weighs more against the few calls.
		maxThrottled := 0.05
		if shape.limit < 10 {
			maxThrottled = 0.07
		}
		require.LessOrEqual(t, thr, maxThrottled, "limit %g", shape.limit)
	}
}

func TestControlPacesUnderTheHeadersLimit(t *testing.T) {
	t.Parallel()
	share, thr := simulate(t, PacerConfig{Concurrency: 32}, 30, 15, 60, true)
	require.InDelta(t, PacerHeadroomDefault, share, 0.02)
	require.Zero(t, thr)
}

func TestControlHeadersAndThrottles(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newControl(PacerConfig{Concurrency: 4}, now)
	req, tok := c.fleetRates()
	require.Equal(t, PaceStarting, c.source)
	require.InDelta(t, PacerInitialRateDefault, req, 1e-9, "starts low")
	require.Zero(t, tok)

	rl := provider.ParseRateLimit("openai", map[string]string{
		"x-ratelimit-limit-requests": "600", "x-ratelimit-remaining-requests": "599",
		"x-ratelimit-limit-tokens": "60000", "x-ratelimit-remaining-tokens": "59000",
	}, now)
	c.observe(PaceOutcome{At: now, Answered: true, OK: true, RateLimit: rl})
	req, tok = c.fleetRates()
	require.Equal(t, PaceHeaders, c.source)
	require.InDelta(t, 10*PacerHeadroomDefault, req, 1e-9)
	require.InDelta(t, 1000*PacerHeadroomDefault, tok, 1e-9)

	// Two throttles in one hold are one decrease.
	c.observe(PaceOutcome{At: now, Answered: true, Throttled: true, RateLimit: rl})
	c.observe(PaceOutcome{At: now.Add(10 * time.Millisecond), Answered: true, Throttled: true, RateLimit: rl})
	require.InDelta(t, PacerDecreaseDefault, c.factor, 1e-9)
	// Calls succeed while pacing binds: back to the full limit.
	for i := 1; i <= 100; i++ {
		c.tick(now.Add(time.Duration(i)*100*time.Millisecond), true, 10)
	}
	require.InDelta(t, 1, c.factor, 1e-9)

	// An unanswered call says nothing.
	c.observe(PaceOutcome{At: now.Add(20 * time.Second), Throttled: true})
	require.InDelta(t, 1, c.factor, 1e-9)
}

func TestControlAdopt(t *testing.T) {
	t.Parallel()
	now := time.Now()
	c := newControl(PacerConfig{Concurrency: 4}, now)
	c.adopt(PacerPeers{Live: 2, ThrottleRate: 20})
	require.Equal(t, PaceThrottles, c.source)
	req, _ := c.fleetRates()
	require.InDelta(t, 20, req, 1e-9, "a newcomer starts at the fleet's rate")
	c.adopt(PacerPeers{Live: 2, ThrottleRate: 15})
	req, _ = c.fleetRates()
	require.InDelta(t, 15, req, 1e-9, "a peer's decrease holds here too")
	c.adopt(PacerPeers{Live: 2, ThrottleRate: 40})
	req, _ = c.fleetRates()
	require.InDelta(t, 15, req, 1e-9, "a peer's higher rate does not raise ours")

	h := newControl(PacerConfig{}, now)
	h.adopt(PacerPeers{Live: 3, HeaderReqRate: 30, HeaderFactor: 1})
	req, _ = h.fleetRates()
	require.Equal(t, PaceHeaders, h.source)
	require.InDelta(t, 30*PacerHeadroomDefault, req, 1e-9)
}

// fakeNow is a clock for a Pacer's own arithmetic; Wait still sleeps in real
// time for any delay it grants, so tests only ask for delays they refuse.
type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time { return f.t }

func TestPacerShareAndDelay(t *testing.T) {
	t.Parallel()
	clk := &fakeNow{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := newPacer(PacerConfig{}, clk.now)
	p.Observe(PaceOutcome{At: clk.t, Answered: true, OK: true, RateLimit: provider.ParseRateLimit("openai",
		map[string]string{"x-ratelimit-limit-requests": "120", "x-ratelimit-remaining-requests": "100"}, clk.t)})
	st := p.State()
	require.InDelta(t, 2*PacerHeadroomDefault, st.FleetRate, 1e-9)
	require.EqualValues(t, 120, st.Headers.Requests.Limit)

	p.SetLive(2)
	st = p.State()
	require.Equal(t, 2, st.Live)
	require.InDelta(t, PacerHeadroomDefault, st.ShareRate, 1e-9, "each of two processes paces at half")

	ctx := context.Background()
	require.NoError(t, p.Wait(ctx, 10, 0), "the bucket's first token is there")
	err := p.Wait(ctx, 10, 100*time.Millisecond)
	var pd *PaceDelay
	require.True(t, errors.As(err, &pd), "the next one is a second away at ~1/s")
	require.Greater(t, pd.Delay, 900*time.Millisecond)
	// Refused reservations are given back: time passing makes it pass.
	clk.t = clk.t.Add(1100 * time.Millisecond)
	require.NoError(t, p.Wait(ctx, 10, 0))

	// A hold stops the process's calls until then.
	p.Observe(PaceOutcome{At: clk.t, Answered: true, Throttled: true, Hold: clk.t.Add(5 * time.Second)})
	clk.t = clk.t.Add(2 * time.Second)
	require.True(t, errors.As(p.Wait(ctx, 1, time.Second), &pd))
	require.InDelta(t, 3*time.Second, pd.Delay, float64(100*time.Millisecond))
}

func TestPacerTokens(t *testing.T) {
	t.Parallel()
	clk := &fakeNow{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := newPacer(PacerConfig{}, clk.now)
	p.Observe(PaceOutcome{At: clk.t, Answered: true, OK: true, RateLimit: provider.ParseRateLimit("anthropic",
		map[string]string{"anthropic-ratelimit-input-tokens-limit": "6000", "anthropic-ratelimit-input-tokens-remaining": "6000"}, clk.t)})
	st := p.State()
	require.Zero(t, st.FleetRate, "no request limit named")
	require.InDelta(t, 100*PacerHeadroomDefault, st.FleetTokens, 1e-9)
	ctx := context.Background()
	var pd *PaceDelay
	require.True(t, errors.As(p.Wait(ctx, 50, 0), &pd), "the bucket grows to a request's size first")
	clk.t = clk.t.Add(time.Second)
	require.NoError(t, p.Wait(ctx, 50, 0))
	require.True(t, errors.As(p.Wait(ctx, 50, 0), &pd), "50 tokens at ~97/s: the next waits")
	require.InDelta(t, 0.5, pd.Delay.Seconds(), 0.05)

	// Usage calibrates the estimate: the provider counted twice as many.
	for range 50 {
		p.Observe(PaceOutcome{At: clk.t, Answered: true, OK: true, EstTokens: 50, InputTokens: 100})
	}
	clk.t = clk.t.Add(10 * time.Second)
	require.True(t, errors.As(p.Wait(ctx, 50, 0), &pd), "the bucket grows to the calibrated size first")
	clk.t = clk.t.Add(10 * time.Second)
	require.NoError(t, p.Wait(ctx, 50, 0))
	require.True(t, errors.As(p.Wait(ctx, 50, 0), &pd))
	require.InDelta(t, 1.0, pd.Delay.Seconds(), 0.1, "each request now costs about 100 tokens")
}

func TestPacerHeartbeatSharesAndExpires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ttl := 3 * time.Second
	a := PaceState{Source: PaceThrottles, FleetRate: 20, Factor: 1}
	peers, err := b.store.PacerHeartbeat(ctx, "main", "proc-a", a, ttl)
	require.NoError(t, err)
	require.Equal(t, PacerPeers{Live: 1}, peers, "alone")

	rl := provider.ParseRateLimit("openai", map[string]string{
		"x-ratelimit-limit-requests": "1800", "x-ratelimit-remaining-requests": "17", "x-ratelimit-reset-requests": "400ms",
	}, b.clock.Now())
	bst := PaceState{Source: PaceThrottles, FleetRate: 15, Factor: 1, Headers: rl, HeadersAt: b.clock.Now()}
	peers, err = b.store.PacerHeartbeat(ctx, "main", "proc-b", bst, ttl)
	require.NoError(t, err)
	require.Equal(t, 2, peers.Live)
	require.InDelta(t, 20, peers.ThrottleRate, 1e-9, "b hears a's rate")

	peers, err = b.store.PacerHeartbeat(ctx, "main", "proc-a", a, ttl)
	require.NoError(t, err)
	require.Equal(t, 2, peers.Live)
	require.InDelta(t, 15, peers.ThrottleRate, 1e-9)

	list, err := b.store.ListPacing(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, 2, list[0].Live)
	require.InDelta(t, 15, list[0].RatePerS, 1e-9, "the fleet paces at the lowest rate")
	require.InDelta(t, 7.5, list[0].ShareRatePerS, 1e-9)
	require.EqualValues(t, 1800, *list[0].LimitRequests)
	require.EqualValues(t, 17, *list[0].RemainingRequests)

	// b dies: no more heartbeats. Its row stops counting after the TTL.
	b.clock.Advance(ttl + time.Millisecond)
	peers, err = b.store.PacerHeartbeat(ctx, "main", "proc-a", a, ttl)
	require.NoError(t, err)
	require.Equal(t, PacerPeers{Live: 1}, peers, "a dead process's share is a's again")

	// A process that stops leaves at once.
	_, err = b.store.PacerHeartbeat(ctx, "main", "proc-c", a, ttl)
	require.NoError(t, err)
	require.NoError(t, b.store.PacerLeave(ctx, "proc-c"))
	peers, err = b.store.PacerHeartbeat(ctx, "main", "proc-a", a, ttl)
	require.NoError(t, err)
	require.Equal(t, 1, peers.Live)
}

func TestPacersServiceSetsTheShare(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pa, err := NewPacer(PacerConfig{})
	require.NoError(t, err)
	pb, err := NewPacer(PacerConfig{})
	require.NoError(t, err)
	rl := provider.ParseRateLimit("openai", map[string]string{"x-ratelimit-limit-requests": "600"}, time.Now())
	pa.Observe(PaceOutcome{Answered: true, OK: true, RateLimit: rl})
	sa, err := NewPacers(b.store, map[string]*Pacer{"main": pa}, PacersConfig{Owner: "a", Heartbeat: time.Hour})
	require.NoError(t, err)
	sb, err := NewPacers(b.store, map[string]*Pacer{"main": pb}, PacersConfig{Owner: "b", Heartbeat: time.Hour})
	require.NoError(t, err)
	require.NoError(t, sa.Start(ctx))
	require.NoError(t, sb.Start(ctx))
	st := pb.State()
	require.Equal(t, 2, st.Live)
	require.Equal(t, PaceHeaders, st.Source, "b starts from what a learned")
	require.InDelta(t, 10*PacerHeadroomDefault/2, st.ShareRate, 1e-9)
	require.NoError(t, sa.Sync(ctx))
	require.Equal(t, 2, pa.State().Live)

	sb.Stop(ctx)
	require.NoError(t, sa.Sync(ctx))
	require.Equal(t, 1, pa.State().Live, "a stopped process's share is taken up at the next heartbeat")
	sa.Stop(ctx)
}

// The Pacers service gives a paced key's state to Record once a step (the
// pace history), not at every heartbeat.
func TestPacersRecordOnceAStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	clk := &fakeNow{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	paced := newPacer(PacerConfig{}, clk.now)
	paced.Observe(PaceOutcome{At: clk.t, Answered: true, OK: true, RateLimit: provider.ParseRateLimit("openai",
		map[string]string{"x-ratelimit-limit-requests": "600"}, clk.t)})
	var got []string
	var rates []float64
	s, err := NewPacers(b.store, map[string]*Pacer{"main": paced}, PacersConfig{Owner: "a", Heartbeat: time.Hour,
		Record: func(_ context.Context, key string, st PaceState) error {
			got, rates = append(got, key), append(rates, st.FleetRate)
			return nil
		}})
	require.NoError(t, err)
	require.NoError(t, s.Sync(ctx))
	require.NoError(t, s.Sync(ctx))
	clk.t = clk.t.Add(PaceRecordEveryDefault - time.Second)
	require.NoError(t, s.Sync(ctx))
	require.Equal(t, []string{"main"}, got, "once a step")
	require.InDelta(t, 10*PacerHeadroomDefault, rates[0], 1e-9)
	clk.t = clk.t.Add(time.Second)
	require.NoError(t, s.Sync(ctx))
	require.Equal(t, []string{"main", "main"}, got, "the next step")
}
