package ledger

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Answer is what a call that was answered leaves in the ledger: its
// attempt's outcome, the record's result and, for a pipeline that caches,
// the answer in the response cache; with Resolve, the earlier sends under
// its idempotency key that got no answer are settled as billed once
// (ResolvePossiblyBilled).
type Answer struct {
	AttemptID int64
	Outcome   Outcome
	Batch     string
	RecordID  string
	Output    json.RawMessage
	// Cache keeps Output in the response cache (Key ""): none).
	Cache CacheEntry
	// Resolve settles the other lost sends under IdempotencyKey.
	Resolve        bool
	IdempotencyKey string
}

// QueueSettleAnswer queues on b, as one statement, FinishAttempt,
// StoreResultCached and, with a.Resolve, ResolvePossiblyBilled: the writes
// of an answered call, for the round trip of its completion (the worker:
// a batch that begins the transaction of River's JobCompleteTx). The
// result, the cache row and the resolution are written only when the
// attempt was an intent; otherwise the error FinishAttempt would return
// (ErrAttemptFinished, ErrNotFound) is returned from the batch's Close,
// and the caller rolls back.
func QueueSettleAnswer(b *pgx.Batch, a Answer) error {
	if err := checkOutcome(a.AttemptID, a.Outcome); err != nil {
		return err
	}
	if a.Cache.Key != "" && a.Cache.TTL <= 0 {
		return fmt.Errorf("ledger: store result %s/%s: cache ttl %s is not positive", a.Batch, a.RecordID, a.Cache.TTL)
	}
	args := append(finishArgs(a.AttemptID, a.Outcome), a.Batch, a.RecordID, []byte(a.Output),
		a.Cache.Key, nowArg(a.Cache.Now), a.Cache.TTL.Seconds(), a.Resolve, a.IdempotencyKey)
	b.Queue(settleAnswerSQL, args...).QueryRow(func(row pgx.Row) error {
		if err := scanFinish(row, a.AttemptID); err != nil {
			return fmt.Errorf("ledger: settle answer %s/%s: %w", a.Batch, a.RecordID, err)
		}
		return nil
	})
	return nil
}

// settleAnswerSQL is finishSQL ($1–$13), then the result ($14–$16), the
// cache row ($17–$19) and the resolution ($20, $21), each only after the
// attempt was finished (upd). The resolution leaves the finished attempt
// alone: in one statement the others do not see its update.
const settleAnswerSQL = finishSQL + `, res AS (
		INSERT INTO triage_result (batch, record_id, attempt_id, output)
		SELECT $14, $15, $1, $16 FROM upd
		ON CONFLICT (batch, record_id) DO NOTHING
	), cached AS (
		INSERT INTO triage_response_cache (cache_key, output, attempt_id, created_at, expires_at)
		SELECT $17, $16, $1, coalesce($18, now()), coalesce($18, now()) + make_interval(secs => $19)
		FROM upd WHERE $17 <> ''
		ON CONFLICT (cache_key) DO UPDATE SET output = EXCLUDED.output, attempt_id = EXCLUDED.attempt_id,
			created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
	), resolved AS (
		UPDATE triage_attempt SET status = 'resolved', finished_at = coalesce(finished_at, now())
		WHERE $20 AND idempotency_key = $21 AND status IN ('possibly_billed', 'intent') AND id <> $1
		  AND EXISTS (SELECT 1 FROM upd)
	)
	SELECT EXISTS (SELECT 1 FROM upd), prev.status FROM prev`
