package worker

import (
	"context"
	"errors"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/worker/keys"
)

// paceMaxWaitDefault bounds a pacing wait when the run has no deadline.
const paceMaxWaitDefault = 30 * time.Second

// pace waits for this process's share of the key's rate (keys.Pacer) before
// the intent row is written, so that no wait ever sits between the intent
// and the send. A wait longer than the run can afford (River's deadline
// less the call's own timeout) parks the job instead: nothing is spent.
func (r *Runtime) pace(ctx context.Context, k *keyRuntime, tokens int) (park time.Duration, err error) {
	maxWait := paceMaxWaitDefault
	if dl, ok := ctx.Deadline(); ok {
		maxWait = min(maxWait, time.Until(dl)-(k.cfg.Timeout+r.opts.JobMargin/4))
	}
	err = k.pacer.Wait(ctx, tokens, max(0, maxWait))
	var pd *keys.PaceDelay
	if errors.As(err, &pd) {
		return max(pd.Delay, 100*time.Millisecond), err
	}
	return time.Second, err
}

// observePace tells the key's pacer what a call's answer said: its
// rate-limit headers (successes included), a throttle or a success, and the
// usage that calibrates the token estimate.
func (r *Runtime) observePace(k *keyRuntime, c *call, estTokens int) {
	k.pacer.Observe(keys.PaceOutcome{
		At:        time.Now(),
		Answered:  c.res.Observation.Phase == classify.PhaseResponse,
		OK:        c.verdict.Class == classify.OK,
		Throttled: c.verdict.Class == classify.Throttled,
		RateLimit: c.res.RateLimit, EstTokens: estTokens, InputTokens: c.res.InputTokens,
		Latency: c.res.Elapsed,
	})
}

// throttleWait reacts to a throttle as keys.ThrottleScopeFor decides: only
// this job waits (the pacer has slowed the key down), or this process
// holds the key for a moment, or the key is paused fleet-wide because the
// provider said the whole key must wait. It returns the job's snooze.
func (r *Runtime) throttleWait(ctx context.Context, c *call) (time.Duration, error) {
	k := c.key
	scope, wait := keys.ThrottleScopeFor(retryAfter(c.verdict), c.res.RateLimit, r.opts.KeyPauseAfter, 0)
	wait = min(wait, ThrottleWaitCap)
	if wait <= 0 {
		wait = k.nextThrottleWait(time.Now())
	}
	switch scope {
	case keys.ScopeKey:
		if _, err := r.store.PauseFor(ctx, k.cfg.Name, keys.PauseThrottled, wait); err != nil {
			return 0, err
		}
		_ = r.supervisor.Reconcile(ctx, k.cfg.Name)
	case keys.ScopeHold:
		k.pacer.Observe(keys.PaceOutcome{At: time.Now(), Hold: time.Now().Add(wait)})
	}
	st := k.pacer.State()
	r.log.InfoContext(ctx, "key throttled", "key", k.cfg.Name, "scope", scope.String(), "wait", wait.String(),
		"pace_per_s", st.FleetRate, "code", deref(c.verdict.Code))
	return wait, nil
}

// Pacing returns what this process's pacer knows about key.
func (r *Runtime) Pacing(key string) (keys.PaceState, bool) {
	k := r.keys[key]
	if k == nil {
		return keys.PaceState{}, false
	}
	return k.pacer.State(), true
}

func newPacer(cfg keys.PacerConfig, concurrency int) *keys.Pacer {
	cfg.Concurrency = concurrency
	return keys.NewPacer(cfg)
}
