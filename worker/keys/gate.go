package keys

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sony/gobreaker/v2"
)

// Defaults for StormSettings.
const (
	// StormFailuresDefault: this many transient failures in a row trip the
	// storm breaker.
	StormFailuresDefault = 5
	// StormShareDefault and StormMinCallsDefault: so does a share of
	// transient failures at least this high over StormWindowDefault, once the
	// window holds StormMinCallsDefault calls.
	StormShareDefault    = 0.5
	StormMinCallsDefault = 10
	StormWindowDefault   = 10 * time.Second
	// StormProbeMinDefault and StormProbeMaxDefault bound the cooldown
	// before a probe: the first is StormProbeMinDefault, each failed probe
	// doubles it, up to StormProbeMaxDefault.
	StormProbeMinDefault = 2 * time.Second
	StormProbeMaxDefault = 60 * time.Second
)

// StormSettings are one key's storm breaker thresholds.
type StormSettings struct {
	// Failures in a row that trip the breaker. Default StormFailuresDefault;
	// negative: never by a run.
	Failures int
	// Share of transient failures over Window that trips it once the window
	// holds MinCalls calls. Default StormShareDefault; negative: never by a
	// share.
	Share    float64
	MinCalls int
	Window   time.Duration
	// ProbeMin and ProbeMax bound the cooldown before each probe.
	ProbeMin, ProbeMax time.Duration
}

// Validate refuses a negative MinCalls, Window, ProbeMin or ProbeMax
// (a negative Failures or Share means "never", see above).
func (s StormSettings) Validate() error {
	return notNegative("StormSettings", setting{"MinCalls", s.MinCalls}, setting{"Window", s.Window},
		setting{"ProbeMin", s.ProbeMin}, setting{"ProbeMax", s.ProbeMax})
}

// WithDefaults fills zero fields with the documented defaults.
func (s StormSettings) WithDefaults() StormSettings {
	if s.Failures == 0 {
		s.Failures = StormFailuresDefault
	}
	if s.Share == 0 {
		s.Share = StormShareDefault
	}
	if s.MinCalls == 0 {
		s.MinCalls = StormMinCallsDefault
	}
	if s.Window == 0 {
		s.Window = StormWindowDefault
	}
	if s.ProbeMin == 0 {
		s.ProbeMin = StormProbeMinDefault
	}
	if s.ProbeMax == 0 {
		s.ProbeMax = StormProbeMaxDefault
	}
	s.ProbeMax = max(s.ProbeMax, s.ProbeMin)
	return s
}

// readyToTrip is gobreaker's ReadyToTrip for these settings.
func (s StormSettings) readyToTrip(c gobreaker.Counts) bool {
	if s.Failures > 0 && c.ConsecutiveFailures >= uint32(s.Failures) {
		return true
	}
	return s.Share > 0 && c.Requests >= uint32(s.MinCalls) &&
		float64(c.TotalFailures) >= s.Share*float64(c.Requests)
}

// nextCooldown is the cooldown after a failed probe: doubled, capped.
func (s StormSettings) nextCooldown(cur time.Duration) time.Duration {
	return min(max(2*cur, s.ProbeMin), s.ProbeMax)
}

// Outcome is what a call came to, as the breakers hear it.
type Outcome int

const (
	// OutcomeNone: no call was made (the run ended before it, or was
	// stopped). A probe claim is given back for another job to use soon.
	OutcomeNone Outcome = iota
	// OutcomeExcluded: a call that says nothing about the provider being up
	// or the key's balance (throttled, ambiguous): gobreaker's IsExcluded.
	OutcomeExcluded
	// OutcomeSuccess: the call succeeded.
	OutcomeSuccess
	// OutcomeRejected: the provider answered but rejected the request: it is
	// up (a success for the storm breaker), but a rejection says nothing
	// about the key's balance (excluded for the exhausted breaker's probe).
	OutcomeRejected
	// OutcomeFailure: a transient failure; counts towards the storm breaker.
	OutcomeFailure
	// OutcomeExhausted: the key is exhausted; trips the exhausted breaker.
	OutcomeExhausted
)

// Report is what the breakers did with an outcome.
type Report struct {
	// Tripped: this call opened the exhausted breaker (raise key_exhausted).
	Tripped bool
	// Resumed: this call was the exhausted breaker's probe and closed it.
	Resumed bool
	// Storm is the storm breaker's answer.
	Storm StormReport
	// Changed: some breaker changed state; reconcile the queue now.
	Changed bool
}

// Done reports the outcome of an admitted call. Call it exactly once (later
// calls do nothing and return the zero Report); defer Done(ctx,
// OutcomeNone) right after Admit so that every exit, the early ones too,
// gives a probe claim back.
//
// reason is the verdict's reason slug ("" for none): it is what a breaker
// that this outcome opens shows as its reason (`triage keys`).
type Done func(ctx context.Context, o Outcome, reason string) (Report, error)

// GateConfig configures a Gate.
type GateConfig struct {
	// Key is the key's name. Required.
	Key string
	// ProbeInterval is the exhausted breaker's wait between probes.
	// Required.
	ProbeInterval time.Duration
	// Storm thresholds; zero fields take the defaults.
	Storm StormSettings
}

// Gate is one process's door to one key: the shared breakers and pause
// (Store) plus this process's own view of the storm, which gobreaker's
// TwoStepCircuitBreaker decides (ReadyToTrip over a rolling window,
// IsExcluded for outcomes that say nothing). The decision to trip is this
// process's; PostgreSQL makes it the fleet's (StormFailure), and the fleet's
// generation resets this process's breaker when a probe anywhere closes
// the storm. No lock is held across a call.
type Gate struct {
	store *Store
	cfg   GateConfig

	mu  sync.Mutex
	gen int64 // the shared storm generation cb belongs to
	cb  *gobreaker.TwoStepCircuitBreaker[struct{}]
}

// errExcluded and errFailure are what the Gate hands gobreaker's done.
var (
	errExcluded = errors.New("keys: outcome says nothing about the provider")
	errFailure  = errors.New("keys: transient failure")
)

// NewGate returns key's Gate; storm settings that StormSettings.Validate
// refuses are its error.
func (s *Store) NewGate(cfg GateConfig) (*Gate, error) {
	if err := cfg.Storm.Validate(); err != nil {
		return nil, fmt.Errorf("keys: gate of %s: %w", cfg.Key, err)
	}
	cfg.Storm = cfg.Storm.WithDefaults()
	g := &Gate{store: s, cfg: cfg}
	g.cb = g.newBreaker()
	return g, nil
}

func (g *Gate) newBreaker() *gobreaker.TwoStepCircuitBreaker[struct{}] {
	st := g.cfg.Storm
	return gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name: g.cfg.Key,
		// The fleet's probe protocol sends the probe; this half-open state
		// is only reached when the shared state could not be written, and
		// then lets one call through.
		MaxRequests:  1,
		Interval:     st.Window,
		BucketPeriod: max(st.Window/10, time.Millisecond),
		Timeout:      st.ProbeMin,
		ReadyToTrip:  st.readyToTrip,
		IsExcluded:   func(err error) bool { return errors.Is(err, errExcluded) },
	})
}

// breaker returns this process's breaker for the shared storm generation
// gen: a newer generation (a probe somewhere closed the storm, or a Reset)
// starts a fresh one, so every process drains at once.
func (g *Gate) breaker(gen int64) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gen > g.gen {
		g.gen, g.cb = gen, g.newBreaker()
	}
	return g.cb
}

func (g *Gate) setGeneration(gen int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gen = max(g.gen, gen)
}

// StormSettings returns the gate's storm settings, defaults filled in.
func (g *Gate) StormSettings() StormSettings { return g.cfg.Storm }

func noop(context.Context, Outcome, string) (Report, error) { return Report{}, nil }

// Admit asks whether a call of job jobID may be sent now (Store.AdmitCall:
// both breakers and the pause in one statement on the closed path), then
// asks this process's storm breaker. When the Admission is not Allowed, or
// a pause is returned for a non-probe, the call must not be sent. Done must
// be called once in every case.
func (g *Gate) Admit(ctx context.Context, jobID int64) (Admission, *Pause, Done, error) {
	return g.AdmitWith(ctx, jobID, nil)
}

// AdmitWith is Admit that sends the reads extra queues in the same round
// trip (Store.AdmitCallWith).
func (g *Gate) AdmitWith(ctx context.Context, jobID int64, extra func(b *pgx.Batch)) (Admission, *Pause, Done, error) {
	adm, pause, err := g.store.AdmitCallWith(ctx, g.cfg.Key, jobID, extra)
	if err != nil {
		return Admission{}, nil, noop, err
	}
	if !adm.Allowed {
		return adm, pause, noop, nil
	}
	if adm.Probe {
		return adm, pause, g.once(func(ctx context.Context, o Outcome, reason string) (Report, error) {
			return g.probeDone(ctx, adm, o, reason)
		}), nil
	}
	cb := g.breaker(adm.StormGeneration)
	local, err := cb.Allow()
	if err != nil {
		// This process sees a storm the fleet does not (yet): wait for it.
		adm.Allowed, adm.Breaker, adm.Wait = false, BreakerStorm, g.cfg.Storm.ProbeMin
		return adm, pause, noop, nil
	}
	return adm, pause, g.once(func(ctx context.Context, o Outcome, reason string) (Report, error) {
		return g.callDone(ctx, adm, cb, local, o, reason)
	}), nil
}

func (g *Gate) once(fn Done) Done {
	var once sync.Once
	return func(ctx context.Context, o Outcome, reason string) (rep Report, err error) {
		once.Do(func() { rep, err = fn(context.WithoutCancel(ctx), o, reason) })
		return rep, err
	}
}

// callDone reports an ordinary (not probe) call.
func (g *Gate) callDone(ctx context.Context, adm Admission, cb *gobreaker.TwoStepCircuitBreaker[struct{}], local func(error), o Outcome, reason string) (Report, error) {
	key := g.cfg.Key
	switch o {
	case OutcomeSuccess, OutcomeRejected:
		local(nil)
		return Report{}, nil
	case OutcomeFailure:
		local(errFailure)
		trip := cb.State() != gobreaker.StateClosed
		rep, err := g.store.StormFailure(ctx, key, adm, trip, orDefault(reason, "transient_failures"), g.cfg.Storm.ProbeMin)
		if err != nil {
			return Report{}, err
		}
		if rep.Opened {
			g.setGeneration(rep.Generation)
		}
		return Report{Storm: rep, Changed: rep.Opened}, nil
	case OutcomeExhausted:
		local(errExcluded)
		tripped, err := g.store.Trip(ctx, key, adm, orDefault(reason, "exhausted"), g.cfg.ProbeInterval)
		if err != nil {
			return Report{}, err
		}
		return Report{Tripped: tripped, Changed: true}, nil
	default:
		local(errExcluded)
		return Report{}, nil
	}
}

// probeDone reports the outcome of a probe of either breaker.
func (g *Gate) probeDone(ctx context.Context, adm Admission, o Outcome, reason string) (Report, error) {
	key := g.cfg.Key
	var (
		rep Report
		err error
	)
	if adm.Breaker == BreakerExhausted {
		switch o {
		case OutcomeSuccess:
			rep.Resumed, err = g.store.ProbeResult(ctx, key, adm, true, g.cfg.ProbeInterval)
		case OutcomeExhausted:
			_, err = g.store.ProbeResult(ctx, key, adm, false, g.cfg.ProbeInterval)
		case OutcomeNone:
			// No call: the next probe may go soon, with another job.
			_, err = g.store.ReleaseProbe(ctx, key, adm, time.Second)
		default:
			// A call that says nothing about the balance.
			_, err = g.store.ReleaseProbe(ctx, key, adm, g.cfg.ProbeInterval)
		}
		rep.Changed = true
		if err != nil {
			return rep, fmt.Errorf("keys: exhausted probe: %w", err)
		}
		return rep, nil
	}
	st := g.cfg.Storm
	switch o {
	case OutcomeSuccess, OutcomeRejected:
		rep.Storm.Closed, err = g.store.ProbeResult(ctx, key, adm, true, 0)
	case OutcomeFailure:
		next := st.nextCooldown(adm.Cooldown)
		var applied bool
		applied, err = g.store.ProbeResult(ctx, key, adm, false, next)
		rep.Storm = StormReport{Open: true, Wait: next}
		if !applied && err == nil {
			// Lost the claim (lease ran out): the job still parks, as the
			// storm goes on.
			rep.Storm.Wait = adm.Cooldown
		}
	case OutcomeExhausted:
		// The provider answered, so the storm is over; the key's balance is
		// the exhausted breaker's business.
		if rep.Storm.Closed, err = g.store.ProbeResult(ctx, key, adm, true, 0); err == nil {
			rep.Tripped, err = g.store.Trip(ctx, key, Admission{Breaker: BreakerExhausted, Generation: adm.Generation},
				orDefault(reason, "exhausted"), g.cfg.ProbeInterval)
		}
	case OutcomeNone:
		_, err = g.store.ReleaseProbe(ctx, key, adm, min(time.Second, st.ProbeMin))
	default:
		_, err = g.store.ReleaseProbe(ctx, key, adm, max(adm.Cooldown, st.ProbeMin))
		rep.Storm = StormReport{Open: true, Wait: max(adm.Cooldown, st.ProbeMin)}
	}
	rep.Changed = true
	if err != nil {
		return rep, fmt.Errorf("keys: storm probe: %w", err)
	}
	return rep, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
