package keys

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/triage-dev/triage/worker/provider"
)

// Defaults for PacerConfig.
const (
	// PacerHeadroomDefault is the share of a limit the headers name that the
	// fleet paces at: a little under it, so that the provider's bucket is
	// never drained by the jitter of arrival times.
	PacerHeadroomDefault = 0.97
	// PacerDecreaseDefault is the multiplicative decrease on a throttle.
	// Gentle, because the rate it applies to is the rate the provider was
	// seen to accept, not the rate that overshot.
	PacerDecreaseDefault = 0.9
	// PacerProbeDefault is the additive increase above the last rate that
	// was throttled, as a share of it per second while calls succeed.
	PacerProbeDefault = 0.05
	// PacerRecoverDefault is how fast the rate climbs back towards the last
	// rate that was throttled: the gap closes with this time constant.
	PacerRecoverDefault = 2 * time.Second
	// PacerSlowStartDefault is how much the rate grows per round trip (the
	// last call's latency, at least slowStartMinRTT) while nothing is known
	// about the limit and pacing binds: TCP's slow start. The provider's
	// burst hides the limit until it is empty, so the first refusal comes
	// when the rate is already over the limit by about sqrt(2 × burst ×
	// ln(factor) / (limit × round trip)), and a round trip of calls over it
	// is refused: the gentler the growth, the smaller that overshoot. A
	// tenth per round trip doubles the rate in about 7 round trips (1.5 s
	// at 200 ms) and, with a burst of half a second of the limit, refuses
	// half as many calls as a quarter did (measured in
	// TestPacerFindsAnUnknownLimitWithFewRefusals and BenchmarkPacing).
	PacerSlowStartDefault = 1.1
	// PacerInitialRateDefault is the fleet's requests per second before
	// anything is learned: low, because a provider's bucket hides an
	// overshoot until it is empty, and the slow start finds the limit in a
	// few round trips anyway.
	PacerInitialRateDefault = 4.0
)

// pacerMinRate is the floor of a learned rate, so that a storm of throttles
// cannot stop a key for good (requests per second).
const pacerMinRate = 0.05

// slowStartMinRTT bounds the slow start's round trip from below, so that a
// provider answering in a millisecond is not flooded in one.
const slowStartMinRTT = 5 * time.Millisecond

// PacerConfig configures a Pacer. Zero fields take the defaults.
type PacerConfig struct {
	// InitialRate is the fleet-wide requests per second a key starts at
	// before anything is learned. Default PacerInitialRateDefault. After the
	// first answer the starting rate is at least an eighth of what the
	// workers could do unpaced (Concurrency / latency).
	InitialRate float64
	// Concurrency is the key's concurrency ceiling per process.
	Concurrency int
	// Headroom: see PacerHeadroomDefault.
	Headroom float64
	// Decrease: see PacerDecreaseDefault.
	Decrease float64
	// Probe: see PacerProbeDefault.
	Probe float64
	// Recover: see PacerRecoverDefault.
	Recover time.Duration
	// SlowStart: see PacerSlowStartDefault.
	SlowStart float64
	// KnownRate and KnownTokens are the key's limits in requests and
	// tokens per second as configured ([[keys]] rpm and tpm, divided by
	// 60). When either is set the pacer starts at them, less Headroom
	// (source PaceConfigured), instead of its slow start, and treats them
	// as the provider's headers' limits would be treated: a throttle
	// lowers the share in use, calm brings it back. Limits the provider's
	// headers name replace them once seen. Default 0: unknown.
	KnownRate, KnownTokens float64
}

// Validate refuses a negative InitialRate, Concurrency, Probe, Recover,
// KnownRate or KnownTokens.
func (c PacerConfig) Validate() error {
	return notNegative("PacerConfig", setting{"InitialRate", c.InitialRate}, setting{"Concurrency", c.Concurrency},
		setting{"Probe", c.Probe}, setting{"Recover", c.Recover}, setting{"KnownRate", c.KnownRate},
		setting{"KnownTokens", c.KnownTokens})
}

// WithDefaults returns c with its unset fields set to the defaults: zero,
// and for Headroom and Decrease a share outside (0, 1], for SlowStart a
// factor that would not grow (1 or less).
func (c PacerConfig) WithDefaults() PacerConfig {
	if c.InitialRate == 0 {
		c.InitialRate = PacerInitialRateDefault
	}
	if c.Headroom <= 0 || c.Headroom > 1 {
		c.Headroom = PacerHeadroomDefault
	}
	if c.Decrease <= 0 || c.Decrease >= 1 {
		c.Decrease = PacerDecreaseDefault
	}
	if c.Probe == 0 {
		c.Probe = PacerProbeDefault
	}
	if c.Recover == 0 {
		c.Recover = PacerRecoverDefault
	}
	if c.SlowStart <= 1 {
		c.SlowStart = PacerSlowStartDefault
	}
	return c
}

// PaceSource says where a key's rate comes from.
type PaceSource string

const (
	// PaceStarting: nothing learned yet; the rate grows while pacing binds.
	PaceStarting PaceSource = "starting"
	// PaceHeaders: the limit the provider's rate-limit headers name.
	PaceHeaders PaceSource = "headers"
	// PaceConfigured: the limit the key's rpm/tpm settings name, until
	// the provider's headers name one.
	PaceConfigured PaceSource = "configured"
	// PaceThrottles: learned from throttles (AIMD), the provider sends no
	// rate-limit headers.
	PaceThrottles PaceSource = "throttles"
)

// PaceOutcome is what one call told the pacer.
type PaceOutcome struct {
	// At is when the answer arrived.
	At time.Time
	// Answered: a status line arrived (only then do headers and the
	// outcome say anything about the limit).
	Answered bool
	// OK: the call succeeded. Throttled: the provider refused it for its
	// rate limit. Neither: it failed otherwise (says nothing about the rate).
	OK, Throttled bool
	// RateLimit is what the response's headers said.
	RateLimit provider.RateLimit
	// EstTokens is the estimate the call was paced with; InputTokens is the
	// usage the provider reported (0: none), which calibrates later estimates.
	EstTokens, InputTokens int
	// Latency is the call's wall time.
	Latency time.Duration
	// Hold, when set, stops this process's calls on the key until then: the
	// provider said the key is empty for a moment too short to pause the
	// fleet for.
	Hold time.Time
}

// control is the pacing decision for one key, fleet-wide and pure: it is fed
// outcomes and the passing of time and says what rate the fleet should run
// at. Without headers it is rate-based AIMD in the manner of TCP CUBIC: a
// throttle sets the rate to Decrease × the rate the provider was seen to
// accept and remembers that rate (wmax); while calls succeed and pacing
// binds the rate climbs back to wmax with time constant Recover, then
// probes above it by Probe × wmax per second. Anchoring the decrease on the
// accepted rate, and deciding at most once per hold, makes it converge
// instead of halving at every 429 of a burst.
type control struct {
	cfg    PacerConfig
	source PaceSource

	// rate is the fleet's requests per second (sources starting and
	// throttles); wmax the accepted rate at the last throttle.
	rate, wmax float64
	// factor scales the limits the headers name after throttles (source
	// headers): 1 while the headers' limit holds.
	factor float64
	// reqLimit and tokLimit are the headers' limits per second (0: none).
	reqLimit, tokLimit float64
	last               provider.RateLimit
	lastAt             time.Time

	holdUntil    time.Time // no decision before this (after a decrease)
	lastTick     time.Time
	lastLatency  time.Duration
	throttles    int
	acceptedRate float64 // fleet-wide requests/s the provider accepted lately
	// peakAccepted is the highest accepted rate seen, halving every half
	// minute: a decrease never goes below half of it, so one bad second
	// cannot undo what minutes taught.
	peakAccepted float64

	// recent counts the answers and throttles of the last second, per
	// 100 ms slot, for the background test (see background).
	recent     [acceptedSlots][2]int
	recentSlot int64
	// learnFrom is when the last decrease took effect: answers of calls
	// sent after it and before its hold ended, at the decreased rate,
	// teach the background (bgN answers, bgK of them throttled, decayed by
	// count).
	learnFrom time.Time
	bgN, bgK  float64
	// shared: other processes pace the key too (the background is then
	// neither learned nor used, see background).
	shared bool
}

// Background refusals. A provider that sheds load refuses a share of the
// calls whatever their rate (the storm scenario: one in ten). Taken for a
// limit, each refusal cuts the rate, which lowers the accepted rate the
// next cut is anchored on, and the key spirals down to a few calls a
// second. What tells the two apart is that a limit's refusals depend on the
// rate: once a decrease has brought the rate under the limit, the calls sent
// after it are accepted; refusals that go on among the calls sent at the
// decreased rate (during the hold that follows a decrease, when the rate
// does not rise) are background. A throttle then lowers the rate only if
// the refusals of the last second stand out of that background (more than
// its expectation plus two standard deviations, Poisson), as a round trip
// of refusals over a limit does. With no background known, as against a
// plain limit, every throttle counts as before.
const (
	// bgDecay weighs the background by the last ~100 answers it learned
	// from, so that it fades within a few hundred calls once the refusals
	// stop coming.
	bgDecay = 0.99
	// bgMinAnswers: a background is believed only after this many answers.
	bgMinAnswers = 20
	// bgLearnBelow: after its hold, a decrease still teaches the
	// background while the rate, climbing back, stays under this share of
	// wmax (halfway from the decreased rate), so that a key at a few calls
	// a second learns it from more than the hold's one or two calls.
	bgLearnBelow = 0.95
	// bgMinShare: a background under this share is not told apart from a
	// limit (a limit's own jitter leaves about that much), and costs little
	// when taken for one.
	bgMinShare = 0.02
)

func newControl(cfg PacerConfig, now time.Time) *control {
	cfg = cfg.WithDefaults()
	c := &control{cfg: cfg, source: PaceStarting, rate: cfg.InitialRate, factor: 1, lastTick: now}
	if cfg.KnownRate > 0 || cfg.KnownTokens > 0 {
		c.source, c.reqLimit, c.tokLimit = PaceConfigured, max(cfg.KnownRate, 0), max(cfg.KnownTokens, 0)
	}
	return c
}

// fleetRates returns the fleet's requests and tokens per second; 0 means
// no limit.
func (c *control) fleetRates() (req, tok float64) {
	switch c.source {
	case PaceHeaders, PaceConfigured:
		if c.reqLimit > 0 {
			req = c.reqLimit * c.cfg.Headroom * c.factor
		}
		if c.tokLimit > 0 {
			tok = c.tokLimit * c.cfg.Headroom * c.factor
		}
		if req == 0 && tok == 0 {
			// Headers named only limits pacing cannot use (a daily request
			// limit): pace by what throttles teach.
			req = c.rate
		}
		return req, tok
	default:
		return c.rate, 0
	}
}

// startFrom raises the starting rate to rate while nothing is known yet.
func (c *control) startFrom(rate float64) {
	if c.source == PaceStarting {
		c.rate = max(c.rate, rate)
	}
}

// observe takes one call's outcome.
func (c *control) observe(o PaceOutcome) {
	if !o.Answered {
		return
	}
	if o.Latency > 0 {
		c.lastLatency = o.Latency
	}
	if rl := o.RateLimit; rl.Known() {
		c.last, c.lastAt = rl, o.At
		req := rl.Requests.PerSecond()
		if rl.Requests.Per > time.Hour {
			req = 0 // a daily limit says nothing about the pace within the minute
		}
		tok := rl.TokenWindow().PerSecond()
		if req > 0 || tok > 0 {
			c.reqLimit, c.tokLimit = req, tok
			if c.source != PaceHeaders {
				c.source = PaceHeaders
				c.factor = 1
			}
		}
	}
	c.countRecent(o)
	if !o.Throttled || o.At.Before(c.holdUntil) {
		return
	}
	if bg := c.background(); bg > 0 {
		n, k := c.recentCounts(o.At)
		if e := float64(n) * bg; float64(k) <= e+2*math.Sqrt(e) {
			return // as many refusals as the background explains
		}
	}
	// One decision per hold: the calls already in flight when the rate
	// overshot are all refused together; they are one signal, not many.
	c.throttles++
	// The hold covers the calls reserved and in flight before the decrease
	// took effect: their refusals arrive for a round trip or two more.
	c.holdUntil = o.At.Add(paceHorizon + 250*time.Millisecond + 2*c.lastLatency)
	if c.source == PaceConfigured && c.reqLimit > 0 && c.factor*c.cfg.Decrease < 0.5 {
		// Throttled at half the configured limit: the setting is wrong
		// (or the account's limit fell). Learn the limit from the
		// throttles instead, from the rate in use now.
		c.rate = c.reqLimit * c.cfg.Headroom * c.factor
		c.source, c.factor = PaceThrottles, 1
	}
	if c.source == PaceHeaders || c.source == PaceConfigured {
		c.factor = max(0.5, c.factor*c.cfg.Decrease)
		return
	}
	base := c.rate
	if c.acceptedRate > 0 && c.acceptedRate < base {
		base = c.acceptedRate
	}
	c.wmax = base
	c.rate = max(pacerMinRate, base*c.cfg.Decrease, c.peakAccepted/2)
	if c.source == PaceThrottles {
		// Not after the slow start's end: the accepted rate it is
		// anchored on includes the provider's burst, so that decrease may
		// leave the rate over the limit for a while.
		c.learnFrom = o.At.Add(paceHorizon)
	}
	c.source = PaceThrottles
}

// countRecent counts an answer in the last second's slots and, when its
// call was sent at the decreased rate after the last decrease took effect,
// in the background.
func (c *control) countRecent(o PaceOutcome) {
	slot := o.At.UnixMilli() / 100
	if c.recentSlot == 0 || slot-c.recentSlot >= acceptedSlots {
		c.recent = [acceptedSlots][2]int{}
	} else {
		for s := c.recentSlot + 1; s <= slot; s++ {
			c.recent[s%acceptedSlots] = [2]int{}
		}
	}
	c.recentSlot = max(c.recentSlot, slot)
	r := &c.recent[slot%acceptedSlots]
	r[0]++
	thr := 0.0
	if o.Throttled {
		r[1]++
		thr = 1
	}
	if sent := o.At.Add(-o.Latency); !c.shared && c.source == PaceThrottles && !c.learnFrom.IsZero() && !sent.Before(c.learnFrom) &&
		(sent.Before(c.holdUntil) || c.rate <= bgLearnBelow*c.wmax) {
		c.bgN = c.bgN*bgDecay + 1
		c.bgK = c.bgK*bgDecay + thr
	}
}

// recentCounts returns the answers and throttles of the last second.
func (c *control) recentCounts(now time.Time) (n, k int) {
	slot := now.UnixMilli() / 100
	for s := slot - acceptedSlots + 1; s <= slot; s++ {
		if s > c.recentSlot-acceptedSlots && s <= c.recentSlot {
			n += c.recent[s%acceptedSlots][0]
			k += c.recent[s%acceptedSlots][1]
		}
	}
	return n, k
}

// background is the share of calls the provider refuses whatever the
// rate, as far as it is known (0: none known). Only a process alone on the
// key learns and uses one: with several, the refusals among the calls one
// sends at its decreased rate also come from the others still over their
// share until they decide or adopt its rate (a heartbeat or two later), and
// a limit's refusals would be learned as background (measured: 5 to 9 % in
// a minute at the benchmark's two-process shapes).
func (c *control) background() float64 {
	if c.shared || c.bgN < bgMinAnswers {
		return 0
	}
	if b := c.bgK / c.bgN; b >= bgMinShare {
		return b
	}
	return 0
}

// tick moves the rate up as time passes: binding says pacing held calls
// back lately (there is demand above the rate), accepted is the fleet's
// recent accepted requests per second.
func (c *control) tick(now time.Time, binding bool, accepted float64) {
	dt := now.Sub(c.lastTick).Seconds()
	if dt <= 0 {
		return
	}
	c.lastTick = now
	c.acceptedRate = accepted
	c.peakAccepted = max(accepted, c.peakAccepted*math.Pow(0.5, dt/30))
	if !binding || now.Before(c.holdUntil) {
		return
	}
	switch c.source {
	case PaceStarting:
		if c.lastLatency == 0 {
			return // no answer yet: nothing says the rate is too low
		}
		if c.acceptedRate > 0 && c.rate >= 2*c.acceptedRate {
			// The calls do not follow the rate up (the answers of the
			// last second lag behind it, the workers cannot keep up, a
			// newcomer is still holding): a rate twice what the provider
			// has been seen to accept is not validated by any call, and
			// growing it further only sets up a larger overshoot when
			// the calls catch up (TCP's rule for an application-limited
			// sender, RFC 7661). Against an endpoint with no limit it
			// also keeps the rate near what the workers do, where it grew
			// without bound while the concurrency ceiling held them back;
			// that costs about 1 % of the calls of the first 4 s at 2 ms
			// latency, the accepted rate trailing the growth.
			return
		}
		rtt := max(slowStartMinRTT, c.lastLatency)
		// At most four-fold per tick: growth counts only time in which
		// pacing held calls back.
		c.rate *= min(4, math.Pow(c.cfg.SlowStart, dt/rtt.Seconds()))
	case PaceThrottles:
		if c.rate < c.wmax {
			c.rate += (c.wmax - c.rate) * min(1, dt/c.cfg.Recover.Seconds())
		}
		// The probe speeds up the longer no throttle came, so that a rate
		// anchored too low (a process that had hardly called yet) finds
		// the limit again in seconds, not minutes.
		calm := 1 + now.Sub(c.holdUntil).Seconds()/c.cfg.Recover.Seconds()
		c.rate += max(c.wmax, c.rate) * c.cfg.Probe * min(probeCalmCap, calm*calm) * dt
	case PaceHeaders, PaceConfigured:
		c.factor = min(1, c.factor+c.cfg.Probe*2*dt)
	}
}

// adopt merges what the other live processes learned (Store.PacerHeartbeat):
// a process that knows nothing takes the fleet's rate; processes learning
// from throttles follow the lowest rate among them, so a decrease any of
// them decided holds for all within a heartbeat.
func (c *control) adopt(p PacerPeers) {
	switch c.source {
	case PaceStarting:
		if p.HeaderReqRate > 0 || p.HeaderTokRate > 0 {
			c.source, c.factor = PaceHeaders, 1
			c.reqLimit, c.tokLimit = p.HeaderReqRate, p.HeaderTokRate
			if c.reqLimit == 0 && p.ThrottleRate > 0 {
				c.rate = p.ThrottleRate
			}
		} else if p.ThrottleRate > 0 {
			c.source = PaceThrottles
			c.rate, c.wmax = p.ThrottleRate, p.ThrottleRate/c.cfg.Decrease
		} else if p.StartingRate > c.rate {
			// The whole fleet is still looking for the limit: look together.
			c.rate = p.StartingRate
		}
	case PaceThrottles:
		if p.ThrottleRate > 0 && p.ThrottleRate < c.rate {
			c.rate = p.ThrottleRate
		}
	case PaceHeaders, PaceConfigured:
		if p.HeaderFactor > 0 && p.HeaderFactor < c.factor {
			c.factor = p.HeaderFactor
		}
	}
}

// Pacer paces one key's calls in this process at its share of the key's
// fleet-wide rate: requests per second and, when the provider names a
// token limit, tokens per second, each a token bucket
// (golang.org/x/time/rate). It learns the rate from the provider's
// rate-limit headers (every response) or, without them, from throttles
// (control). The share is the fleet rate divided by the live processes,
// which a Pacers service learns from heartbeat rows in PostgreSQL; nothing
// on the call path touches the database. Safe for concurrent use.
type Pacer struct {
	mu        sync.Mutex
	ctl       *control
	live      int
	req, tok  *rate.Limiter
	holdUntil time.Time
	// calib is actual input tokens / estimated, smoothed: the estimate is
	// bytes/4, the provider counts its own way.
	calib float64
	// maxCost is the largest token cost asked for.
	maxCost int
	// sawLatency: the first answer's latency has set the starting rate.
	sawLatency bool
	// boundAt is when a Wait last had to wait.
	boundAt time.Time
	// accepted counts the calls the provider accepted, per 100 ms slot over
	// the last acceptedSlots slots (in this process).
	accepted     [acceptedSlots]int
	acceptedSlot int64
	started      time.Time
	// peersAccepted is the other processes' accepted rate at the last
	// heartbeat (peersKnown: one has happened).
	peersAccepted float64
	peersKnown    bool
	// epoch counts the times this process's share went down: a call that
	// reserved its slot before then is reserved again at the new share
	// (staleReservation), so a decrease applies to every call not yet sent.
	epoch uint64
	now   func() time.Time
	// after is how Wait sleeps between rounds: a real timer, or a test's
	// virtual one (stop as time.Timer.Stop).
	after func(d time.Duration) (c <-chan time.Time, stop func() bool)
}

// realAfter is a real timer.
func realAfter(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// probeCalmCap bounds how much the probe above wmax speeds up while no
// throttle comes: three times Probe at most. The speed-up is for a rate
// anchored too low; more of it makes each probe overshoot the limit further
// before its refusals come back, a round trip later (in
// TestPacerFindsAnUnknownLimitWithFewRefusals at 30 requests/s and 200 ms:
// 2.7 % of the window's calls refused with ten times, 2.4 % with three).
const probeCalmCap = 3.0

const acceptedSlots = 10 // 1 s: the accepted rate is what the provider let through lately

// NewPacer returns a Pacer for one key, alone in the fleet until told
// otherwise (SetLive, or a Pacers service). A cfg that Validate refuses
// is its error.
func NewPacer(cfg PacerConfig) (*Pacer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newPacer(cfg, time.Now), nil
}

func newPacer(cfg PacerConfig, now func() time.Time) *Pacer {
	t := now()
	p := &Pacer{ctl: newControl(cfg, t), live: 1, calib: 1, maxCost: 1, now: now, after: realAfter, started: t,
		req: rate.NewLimiter(rate.Inf, 1), tok: rate.NewLimiter(rate.Inf, 1)}
	p.applyLocked(t)
	return p
}

// PaceDelay is Wait's error when the pace would hold the call back longer
// than allowed: the caller should come back after Delay.
type PaceDelay struct{ Delay time.Duration }

func (e *PaceDelay) Error() string { return "keys: paced: wait " + e.Delay.String() }

// paceHorizon is how far ahead a Wait may hold a reservation. Beyond it
// the Wait gives its reservation back and comes back later, so that a
// decrease of the rate applies to every call not yet due, instead of
// a queue reserved at the old rate going out anyway.
const paceHorizon = 100 * time.Millisecond

// Wait blocks until this process's share of the key's rate lets one
// request go that sends tokens (estimated input tokens), or ctx ends. If
// the pace would hold it longer than maxWait, nothing is taken and a
// *PaceDelay says how long. The bound holds across all of Wait's rounds: a
// wait that gave its reservation back (a decrease, a hold, a slot beyond
// paceHorizon) and finds, coming back, that its turn is now later than
// maxWait after it began returns a *PaceDelay too, never a longer wait.
func (p *Pacer) Wait(ctx context.Context, tokens int, maxWait time.Duration) error {
	until := p.now().Add(max(0, maxWait))
	for {
		delay, kept, ok := p.reserve(tokens, until)
		if !ok {
			return &PaceDelay{Delay: delay}
		}
		if delay <= 0 && kept != nil {
			return nil
		}
		epoch := p.epochNow()
		fire, stop := p.after(delay)
		select {
		case <-ctx.Done():
			stop()
			if kept != nil {
				p.mu.Lock()
				kept[0].Cancel()
				kept[1].Cancel()
				p.mu.Unlock()
			}
			return ctx.Err()
		case <-fire:
		}
		if kept != nil && !p.staleReservation(epoch) {
			return nil
		}
	}
}

// reserve takes a reservation due within paceHorizon and returns its delay
// and the reservation (kept); or gives it back and returns how long to
// sleep before trying again (kept nil). ok false: the call's turn comes
// after until (the end of the caller's maxWait); nothing is kept and delay
// is how long from now its turn is.
func (p *Pacer) reserve(tokens int, until time.Time) (delay time.Duration, kept *[2]*rate.Reservation, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.tickLocked(now)
	cost := max(1, int(math.Ceil(float64(tokens)*p.calib)))
	if cost > p.maxCost {
		p.maxCost = cost
		if p.tok.Limit() != rate.Inf && cost > p.tok.Burst() {
			p.tok.SetBurstAt(now, cost)
		}
	}
	rr := p.req.ReserveN(now, 1)
	tr := p.tok.ReserveN(now, cost)
	hold := p.holdUntil.Sub(now)
	delay = max(rr.DelayFrom(now), tr.DelayFrom(now), hold)
	if delay > 0 {
		p.boundAt = now
	}
	if delay > 0 && now.Add(delay).After(until) {
		rr.CancelAt(now)
		tr.CancelAt(now)
		return delay, nil, false
	}
	if hold > 0 || delay > paceHorizon {
		// The newest reservation is the last in line, so giving it back
		// restores its tokens whole.
		rr.CancelAt(now)
		tr.CancelAt(now)
		if hold > 0 && delay == hold {
			return hold, nil, true
		}
		sleep := max(time.Millisecond, delay-paceHorizon/2)
		if p.ctl.source == PaceStarting {
			// The rate grows by the round trip while the limit is unknown:
			// look again soon rather than sleep at the starting rate.
			sleep = min(sleep, paceHorizon/2)
		}
		return sleep, nil, true
	}
	return delay, &[2]*rate.Reservation{rr, tr}, true
}

// epochNow is the count of decreases of this process's share so far.
func (p *Pacer) epochNow() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch
}

// staleReservation reports whether the share went down since epoch: a
// reservation taken before then was made at a rate the provider refused,
// and the calls it lets out would be refused too: up to paceHorizon of
// calls over the limit on top of the round trip in flight (in the
// simulation at 30 requests/s and 200 ms this cut the start-up's refusals
// from 19 to 13). Its slot is not given back: it has passed, and taking
// one more slot at the lower rate errs on the side of the limit.
func (p *Pacer) staleReservation(epoch uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch != epoch
}

// Observe takes one call's outcome: headers, throttle or success, usage.
func (p *Pacer) Observe(o PaceOutcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o.At.IsZero() {
		o.At = p.now()
	}
	if o.OK {
		p.countAcceptedLocked(o.At)
		if o.EstTokens > 0 && o.InputTokens > 0 {
			r := float64(o.InputTokens) / float64(o.EstTokens)
			p.calib = min(8, max(0.25, 0.9*p.calib+0.1*r))
		}
	}
	if o.Hold.After(p.holdUntil) {
		p.holdUntil = o.Hold
	}
	p.ctl.observe(o)
	if o.OK && o.Latency > 0 && !p.sawLatency {
		// The first answer tells what the workers could do unpaced; the
		// search for an unknown limit starts at an eighth of that, so a
		// fast endpoint is not held back for long.
		p.sawLatency = true
		p.ctl.startFrom(float64(max(1, p.ctl.cfg.Concurrency)*p.live) / o.Latency.Seconds() / 8)
	}
	p.applyLocked(o.At)
}

// SetLive sets how many processes share the key (at least 1).
func (p *Pacer) SetLive(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live = max(1, n)
	p.ctl.shared = p.live > 1
	p.applyLocked(p.now())
}

// adopt merges the peers' state and the live count from a heartbeat.
func (p *Pacer) adopt(peers PacerPeers) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live = max(1, peers.Live)
	p.ctl.shared = p.live > 1
	p.peersAccepted, p.peersKnown = peers.AcceptedRate, true
	p.ctl.adopt(peers)
	p.applyLocked(p.now())
}

func (p *Pacer) countAcceptedLocked(at time.Time) {
	p.advanceSlotsLocked(at)
	p.accepted[p.acceptedSlot%acceptedSlots]++
}

func (p *Pacer) advanceSlotsLocked(at time.Time) {
	slot := at.UnixMilli() / 100
	if p.acceptedSlot == 0 {
		p.acceptedSlot = slot
	}
	for s := p.acceptedSlot + 1; s <= slot && s-p.acceptedSlot <= acceptedSlots; s++ {
		p.accepted[s%acceptedSlots] = 0
	}
	if slot-p.acceptedSlot > acceptedSlots {
		p.accepted = [acceptedSlots]int{}
	}
	if slot > p.acceptedSlot {
		p.acceptedSlot = slot
	}
}

// ownAcceptedLocked is this process's accepted requests per second over
// the window.
func (p *Pacer) ownAcceptedLocked(now time.Time) float64 {
	p.advanceSlotsLocked(now)
	n := 0
	for _, c := range p.accepted {
		n += c
	}
	// The window counts only time in which this process could call: a
	// newcomer holds its calls for a heartbeat (Pacers.Start), and a rate
	// measured over the hold would be a fraction of its share; the
	// decrease that ends its slow start, anchored on that, would leave the
	// fleet (which follows its lowest rate) at a tenth of the limit.
	from := p.started
	if p.holdUntil.After(from) && !p.holdUntil.After(now) {
		from = p.holdUntil
	}
	window := min(acceptedSlots/10.0, max(0.1, now.Sub(from).Seconds()))
	return float64(n) / window
}

// acceptedLocked is the fleet's accepted requests per second: this
// process's plus what its peers said at the last heartbeat (or this
// process's times the live processes before any heartbeat told).
func (p *Pacer) acceptedLocked(now time.Time) float64 {
	own := p.ownAcceptedLocked(now)
	if p.peersKnown {
		if p.ctl.source == PaceStarting {
			// The peers' figure is as old as a heartbeat, two at most;
			// during the slow start, when the fleet's rate grows by a
			// tenth every round trip, it is far too low, and the decrease
			// that ends the slow start, anchored on it, would leave the
			// fleet well under the limit for seconds. The processes pace
			// at equal shares, so this process's own rate times the live
			// processes is the fresher figure. (Later the shares may
			// differ, and the rates change slowly.)
			return max(own+p.peersAccepted, own*float64(p.live))
		}
		return own + p.peersAccepted
	}
	return own * float64(p.live)
}

func (p *Pacer) bindingLocked(now time.Time) bool {
	return !p.boundAt.IsZero() && now.Sub(p.boundAt) < time.Second
}

func (p *Pacer) tickLocked(now time.Time) {
	if now.Sub(p.ctl.lastTick) < 50*time.Millisecond {
		return
	}
	p.ctl.tick(now, p.bindingLocked(now), p.acceptedLocked(now))
	p.applyLocked(now)
}

// applyLocked sets the buckets to this process's share. A burst of a tenth
// of a second's share lets a brief gap in demand be made up without
// letting the fleet's bursts add up to more than the provider's; the token
// bucket holds at least the largest request seen, or it could never pass.
func (p *Pacer) applyLocked(now time.Time) {
	req, tok := p.ctl.fleetRates()
	set := func(l *rate.Limiter, fleet float64, minBurst int) {
		if fleet <= 0 {
			l.SetLimitAt(now, rate.Inf)
			return
		}
		share := fleet / float64(p.live)
		if rate.Limit(share) < l.Limit() {
			p.epoch++
		}
		l.SetLimitAt(now, rate.Limit(share))
		l.SetBurstAt(now, max(minBurst, int(math.Ceil(share/10))))
	}
	set(p.req, req, 1)
	set(p.tok, tok, p.maxCost)
}

// PaceState is what a Pacer knows, for `triage keys`, /metrics, the
// progress line and the heartbeat.
type PaceState struct {
	Source PaceSource
	// FleetRate and FleetTokens are the key's requests and tokens per
	// second for the whole fleet; 0: not limited.
	FleetRate, FleetTokens float64
	// Live is the processes sharing the key; ShareRate = FleetRate/Live.
	Live      int
	ShareRate float64
	// Binding: pacing held calls back in the last second.
	Binding bool
	// Throttles counts the throttles that lowered the rate.
	Throttles int
	// Headers is the last rate-limit state the provider sent, at HeadersAt
	// (zero: never).
	Headers   provider.RateLimit
	HeadersAt time.Time
	// Factor is the share of the headers' limit in use after throttles.
	Factor float64
	// ReqLimit and TokLimit are the headers' limits per second (0: none).
	ReqLimit, TokLimit float64
	// AcceptedRate is this process's requests per second the provider
	// accepted over the last second.
	AcceptedRate float64
}

// State returns what the Pacer knows now.
func (p *Pacer) State() PaceState {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.tickLocked(now)
	req, tok := p.ctl.fleetRates()
	st := PaceState{Source: p.ctl.source, FleetRate: req, FleetTokens: tok, Live: p.live,
		Binding: p.bindingLocked(now), Throttles: p.ctl.throttles, Headers: p.ctl.last, HeadersAt: p.ctl.lastAt, Factor: p.ctl.factor,
		ReqLimit: p.ctl.reqLimit, TokLimit: p.ctl.tokLimit, AcceptedRate: p.ownAcceptedLocked(now)}
	if req > 0 {
		st.ShareRate = req / float64(p.live)
	}
	return st
}

// ThrottleScope says what a throttle stops.
type ThrottleScope int

const (
	// ScopeJob: only the job that was refused waits; the pacer slows the
	// key down.
	ScopeJob ThrottleScope = iota
	// ScopeHold: the provider says the key is empty for a moment too short
	// to pause the fleet for: the job waits and this process holds its
	// calls on the key until then (PaceOutcome.Hold).
	ScopeHold
	// ScopeKey: the provider says the whole key must wait: pause it
	// fleet-wide.
	ScopeKey
)

func (s ThrottleScope) String() string {
	switch s {
	case ScopeKey:
		return "key"
	case ScopeHold:
		return "hold"
	default:
		return "job"
	}
}

// Defaults for ThrottleScopeFor.
const (
	// KeyPauseAfterDefault: a retry-after longer than this is the provider
	// saying the whole key must wait, not just this request.
	KeyPauseAfterDefault = 5 * time.Second
	// KeyPauseMinDefault: a key found empty for less than this is held in
	// the process (ScopeHold), not paused fleet-wide: a fleet-wide pause
	// costs a database write and a River queue pause and resume.
	KeyPauseMinDefault = time.Second
)

// ThrottleScopeFor decides, from one throttled response, whether only the
// job waits or the whole key, and for how long (0: the provider named no
// wait; the caller picks one). retryAfter is the wait the response named
// (retry-after, retry-after-ms, ...), rl its rate-limit headers. The key
// waits fleet-wide when retryAfter exceeds keyPauseAfter, or when the
// headers say a window is empty (remaining 0) and name when it refills,
// for at least keyPauseMin; zero thresholds take the defaults. Pure.
func ThrottleScopeFor(retryAfter time.Duration, rl provider.RateLimit, keyPauseAfter, keyPauseMin time.Duration) (ThrottleScope, time.Duration) {
	if keyPauseAfter <= 0 {
		keyPauseAfter = KeyPauseAfterDefault
	}
	if keyPauseMin <= 0 {
		keyPauseMin = KeyPauseMinDefault
	}
	if retryAfter > keyPauseAfter {
		return ScopeKey, retryAfter
	}
	var reset time.Duration
	for _, w := range []provider.RateWindow{rl.Requests, rl.TokenWindow()} {
		if w.Empty() && w.Reset > 0 && w.Per <= time.Hour {
			reset = max(reset, w.Reset)
		}
	}
	if reset > 0 {
		// The next request passes when the provider said (retry-after), or
		// at the latest when the window is full again.
		wait := reset
		if retryAfter > 0 {
			wait = min(wait, retryAfter)
		}
		if wait >= keyPauseMin {
			return ScopeKey, wait
		}
		return ScopeHold, wait
	}
	return ScopeJob, retryAfter
}
