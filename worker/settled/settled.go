// Package settled announces the batches that settled: the batch_settled
// alert (keys.AlertBatchSettled), once per settle for the fleet. Every
// worker announces on its spend tick (worker/spendwatch) and as it stops;
// `triage batch cancel` (worker/operator) after a cancel that settled the
// batch at once.
package settled

import (
	"context"
	"fmt"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
)

// Announce raises the batch_settled alert (keys.AlertBatchSettled,
// logged at INFO, posted to [alerts] webhook_url) for every batch that has
// settled since it was last announced, and returns how many it announced.
// The claim is ledger.ClaimSettled: with several processes calling this at
// once, each settle is announced by exactly one. Every worker calls it on
// its spend tick; `triage batch cancel` calls it after a cancel that
// settled the batch at once. The alert's fields are the batch's counts and
// spend, as `triage status B --json` gives them.
func Announce(ctx context.Context, db ledger.DBTX, alerter *keys.Alerter) (int, error) {
	claims, err := ledger.ClaimSettled(ctx, db)
	if err != nil {
		return 0, err
	}
	for _, c := range claims {
		alerter.Alert(ctx, Alert(c, statusOrEmpty(ctx, db, c.Batch)))
	}
	return len(claims), nil
}

// statusOrEmpty is the batch's status, or one naming only the batch when it
// cannot be read (it was deleted since): the announcement is claimed, so it
// is made either way.
func statusOrEmpty(ctx context.Context, db ledger.DBTX, batch string) ledger.Status {
	st, err := ledger.BatchStatus(ctx, db, batch)
	if err != nil {
		return ledger.Status{Batch: batch}
	}
	return st
}

// Alert is the batch_settled alert of one claimed settle.
func Alert(c ledger.SettleClaim, st ledger.Status) keys.Alert {
	how := "settled"
	if c.CancelledByHand {
		how = "settled after a cancel by hand"
	}
	return keys.Alert{
		Kind:  keys.AlertBatchSettled,
		Key:   st.Key,
		Batch: c.Batch,
		Info:  true,
		Message: fmt.Sprintf("batch %s: %d of %d records completed, %d dead-lettered, $%.4f spent",
			how, st.Completed, st.Total, st.DeadLettered, st.SpendUSD),
		Fields: map[string]any{
			"pipeline":            st.Pipeline,
			"total":               st.Total,
			"completed":           st.Completed,
			"dead_lettered":       st.DeadLettered,
			"cancelled":           st.Cancelled,
			"calls":               st.Calls,
			"spend_usd":           st.SpendUSD,
			"possibly_billed_usd": st.PossiblyBilledUSD,
			"cancelled_by_hand":   c.CancelledByHand,
		},
	}
}
