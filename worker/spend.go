package worker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/keys"
)

// Prepaid thresholds, each alerted once per key, fleet-wide.
var prepaidThresholds = []struct {
	share float64
	kind  keys.AlertKind
}{
	{0.70, keys.AlertPrepaid70},
	{0.90, keys.AlertKind("prepaid_90")},
}

// watchSpend folds the spend counters (ledger.FoldSpend), evaluates the
// prepaid and spend-rate alerts from the ledger, dead-letters records whose
// job ended without an outcome (worker/sweep), ends the background
// responses left running for records no longer wanted
// (cancelLeftResponses), deletes expired response-cache rows (sweepCache)
// and announces the batches that settled (AnnounceSettled), every
// SpendCheck until ctx ends. Every process runs
// it; ledger.ClaimOnce and ledger.ClaimSettled make each alert fire once
// for the fleet.
func (r *Runtime) watchSpend(ctx context.Context) {
	for tick := 0; ; tick++ {
		if _, err := ledger.FoldSpend(ctx, r.pool); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "fold spend counters", "err", err)
		}
		r.checkSpend(ctx)
		r.sweeper.Tick(ctx, tick)
		r.cancelLeftResponses(ctx)
		r.sweepCache(ctx)
		if _, err := AnnounceSettled(ctx, r.pool, r.alerter); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "announce settled batches", "err", err)
		}
		d := r.opts.SpendCheck
		select {
		case <-ctx.Done():
			return
		case <-time.After(decide.Jitter(d, 0.8, 1.2)):
		}
	}
}

func (r *Runtime) checkSpend(ctx context.Context) {
	now := r.now()
	for name, k := range r.keys {
		if k.cfg.PrepaidUSD > 0 {
			spent, err := ledger.SpendByKey(ctx, r.pool, name, time.Time{})
			if err != nil {
				r.log.WarnContext(ctx, "prepaid check", "key", name, "err", err)
				continue
			}
			for _, th := range prepaidThresholds {
				if spent < th.share*k.cfg.PrepaidUSD {
					continue
				}
				r.alertOnce(ctx, name, prepaidClaim(th.kind, k.cfg.PrepaidUSD), keys.Alert{Kind: th.kind, Key: name,
					Message: fmt.Sprintf("%.0f %% of the prepaid balance spent", 100*spent/k.cfg.PrepaidUSD),
					Fields:  map[string]any{"spent_usd": spent, "prepaid_usd": k.cfg.PrepaidUSD}})
			}
		}
		if limit := r.cfg.Alerts.MaxUSDPerHour; limit > 0 {
			spent, err := ledger.SpendByKey(ctx, r.pool, name, now.Add(-time.Hour))
			if err != nil {
				r.log.WarnContext(ctx, "spend-rate check", "key", name, "err", err)
				continue
			}
			if spent > limit {
				// Once per clock hour: a sustained overspend alerts again
				// the next hour, not on every check.
				bucket := "spend_rate:" + now.UTC().Format("2006-01-02T15")
				r.alertOnce(ctx, name, bucket, keys.Alert{Kind: keys.AlertSpendRate, Key: name,
					Message: fmt.Sprintf("spent $%.2f in the last hour, over alerts.max_usd_per_hour $%.2f", spent, limit),
					Fields:  map[string]any{"spent_usd_last_hour": spent, "max_usd_per_hour": limit}})
			}
		}
	}
}

// prepaidClaim is the alert-once kind of a prepaid threshold for one
// prepaid amount. A top-up is a new prepaid_usd (the total bought for the
// key, which the key's whole spend is compared with): it makes new claims,
// so each threshold alerts again when spend next crosses it. Processes still
// running with the old amount keep finding their old claims and stay
// quiet, instead of alerting again on every check.
func prepaidClaim(kind keys.AlertKind, prepaidUSD float64) string {
	return string(kind) + "@" + strconv.FormatFloat(prepaidUSD, 'f', -1, 64)
}

func (r *Runtime) alertOnce(ctx context.Context, key, kind string, a keys.Alert) {
	first, err := ledger.ClaimOnce(ctx, r.pool, key, kind)
	if err != nil {
		r.log.WarnContext(ctx, "alert claim", "key", key, "kind", kind, "err", err)
		return
	}
	if first {
		r.alerter.Alert(ctx, a)
	}
}
