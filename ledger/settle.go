package ledger

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SettleClaim is one batch whose settle this process claimed to announce.
type SettleClaim struct {
	Batch string
	// CancelledByHand: the batch was cancelled (`triage batch cancel`)
	// before it settled.
	CancelledByHand bool
}

// ClaimSettled claims, fleet-wide, the announcement of every batch that
// has settled (completed + dead-lettered, not requeued, = total) and was not
// announced since it last became pending, and returns those batches. One
// UPDATE ... WHERE settle_notified_at IS NULL: of several processes calling
// it at once each batch goes to exactly one (the others wait on the row
// lock, then find it claimed). Only batches not yet announced are counted
// (a partial index), so the cost is that of the running batches.
func ClaimSettled(ctx context.Context, db DBTX) ([]SettleClaim, error) {
	rows, err := db.Query(ctx, `UPDATE triage_batch b SET settle_notified_at = now()
		WHERE b.settle_notified_at IS NULL
		  AND b.total <= (SELECT count(*) FROM triage_result r WHERE r.batch = b.id)
		      + (SELECT count(*) FROM triage_dead_letter d WHERE d.batch = b.id AND d.requeued_at IS NULL)
		RETURNING b.id, b.state = 'cancelled'`)
	if err != nil {
		return nil, fmt.Errorf("ledger: claim settled batches: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SettleClaim, error) {
		var c SettleClaim
		err := r.Scan(&c.Batch, &c.CancelledByHand)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: claim settled batches: %w", err)
	}
	return out, nil
}
