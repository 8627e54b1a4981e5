package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SetAttemptResponseID stores the id of the provider's response an
// attempt created in background mode (OpenAI Responses API), before the
// worker polls it: a run that stops while the response runs leaves the id
// for the next (PendingResponseID).
func SetAttemptResponseID(ctx context.Context, db DBTX, attemptID int64, responseID string) error {
	tag, err := db.Exec(ctx, `UPDATE triage_attempt SET response_id = $2 WHERE id = $1`, attemptID, responseID)
	if err != nil {
		return fmt.Errorf("ledger: set attempt response id: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("ledger: set attempt response id: attempt %d: %w", attemptID, ErrNotFound)
	}
	return nil
}

// PendingResponseID returns the response id of the newest attempt under an
// idempotency key that created a background response and has no answer
// yet (intent or possibly_billed), "" when there is none: the response to
// poll instead of creating another.
func PendingResponseID(ctx context.Context, db DBTX, idempotencyKey string) (string, error) {
	var id string
	err := db.QueryRow(ctx, `SELECT response_id FROM triage_attempt
		WHERE idempotency_key = $1 AND response_id IS NOT NULL AND status IN ('intent', 'possibly_billed')
		ORDER BY id DESC LIMIT 1`, idempotencyKey).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("ledger: pending response id: %w", err)
	}
	return id, nil
}

// SettleResumedResponse settles the earlier attempts under an idempotency
// key that created the background response responseID and lost it (a run
// stopped or died while it ran), once attempt exceptID polled it to its
// end: billed once, on exceptID's row, they become resolved, resolution
// found (the answer was found by its id, not sent again). It returns how
// many it settled.
func SettleResumedResponse(ctx context.Context, db DBTX, idempotencyKey, responseID string, exceptID int64) (int, error) {
	tag, err := db.Exec(ctx, `UPDATE triage_attempt SET status = 'resolved', resolution = 'found',
			finished_at = coalesce(finished_at, now())
		WHERE idempotency_key = $1 AND response_id = $2 AND id <> $3 AND status IN ('possibly_billed', 'intent')`,
		idempotencyKey, responseID, exceptID)
	if err != nil {
		return 0, fmt.Errorf("ledger: settle resumed response: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
