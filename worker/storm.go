package worker

import (
	"context"
	"time"

	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/keys"
)

// StormAlertAfterDefault is a key's storm_alert_after default: a storm
// breaker open this long raises one storm_open alert. Shorter storms heal
// by themselves and page nobody.
const StormAlertAfterDefault = 5 * time.Minute

// watchStorms raises storm_open, once per storm fleet-wide, for the keys of
// this process whose storm breaker has been open longer than their
// storm_alert_after.
func (r *Runtime) watchStorms(ctx context.Context) {
	for {
		r.checkStorms(ctx)
		r.requeueSuspects(ctx)
		d := r.opts.SpendCheck
		select {
		case <-ctx.Done():
			return
		case <-time.After(decide.Jitter(d, 0.8, 1.2)):
		}
	}
}

func (r *Runtime) checkStorms(ctx context.Context) {
	for name, k := range r.keys {
		st, err := r.store.KeyStatus(ctx, name)
		if err != nil {
			r.log.WarnContext(ctx, "storm check", "key", name, "err", err)
			continue
		}
		s := st.Storm
		if s.State == keys.StateClosed || s.OpenedAt == nil {
			continue
		}
		after := k.cfg.StormAlertAfter
		if after <= 0 {
			after = StormAlertAfterDefault
		}
		open := st.Now.Sub(*s.OpenedAt)
		if open < after {
			continue
		}
		// One alert per storm: the storm is named by when it opened.
		r.alertOnce(ctx, name, string(keys.AlertStormOpen)+":"+s.OpenedAt.UTC().Format(time.RFC3339Nano), keys.Alert{
			Kind: keys.AlertStormOpen, Key: name,
			Message: "provider storm: the key's storm breaker is still open; its jobs stay queued and probes continue",
			Fields:  map[string]any{"open_for": open.Round(time.Second).String(), "cooldown_s": s.CooldownS, "reason": s.Reason},
		})
	}
}

// alertOnce raises a, keyed to key, once for the fleet under the claim
// kind (keys.Alerter.AlertOnce).
func (r *Runtime) alertOnce(ctx context.Context, key, kind string, a keys.Alert) {
	a.Key = key
	r.alerter.AlertOnce(ctx, r.pool, kind, a)
}
