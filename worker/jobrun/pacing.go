package jobrun

import (
	"context"
	"errors"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/keys"
)

// paceMaxWaitDefault bounds a pacing wait when the run has no deadline.
const paceMaxWaitDefault = 30 * time.Second

// pace waits for this process's share of the key's rate (keys.Pacer) before
// the intent row is written, so that no wait ever sits between the intent
// and the send. A wait longer than the run can afford (River's deadline
// less the call's room, Runner.spareTime) parks the job instead: nothing
// is spent. The bound holds across the pacer's rounds (keys.Pacer.Wait).
func (r *Runner) pace(ctx context.Context, k *Key, tokens int) (park time.Duration, err error) {
	maxWait := paceMaxWaitDefault
	if spare, ok := r.spareTime(ctx, k); ok {
		maxWait = min(maxWait, spare)
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
func (r *Runner) observePace(k *Key, c *call, estTokens int) {
	k.pacer.Observe(keys.PaceOutcome{
		At:        time.Now(),
		Answered:  c.res.Observation.Phase == classify.PhaseResponse,
		OK:        c.verdict.Class == classify.OK,
		Throttled: c.verdict.Class == classify.Throttled,
		RateLimit: c.res.RateLimit, EstTokens: estTokens, InputTokens: c.res.InputTokens,
		Latency: c.res.Elapsed,
	})
}

// throttleScope decides how a throttle is waited out, as
// keys.ThrottleScopeFor says: only this job waits (the pacer has slowed the
// key down), this process holds the key for a moment, or the whole key is
// paused fleet-wide (keyWide) because the provider said the key must wait.
// It returns the wait; apply carries out the decision.
func (r *Runner) throttleScope(c *call) (wait time.Duration, keyWide bool) {
	k := c.key
	scope, wait := keys.ThrottleScopeFor(decide.RetryAfter(c.verdict), c.res.RateLimit, r.opts.KeyPauseAfter, 0)
	wait = min(wait, ThrottleWaitCap)
	if wait <= 0 {
		wait = k.nextThrottleWait(time.Now())
	}
	if scope == keys.ScopeHold {
		k.pacer.Observe(keys.PaceOutcome{At: time.Now(), Hold: time.Now().Add(wait)})
	}
	return wait, scope == keys.ScopeKey
}
