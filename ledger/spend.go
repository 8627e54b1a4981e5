package ledger

import (
	"context"
	"fmt"
)

// batchSpentSQL is a batch's billed spend over a triage_batch row aliased b:
// the folded counter plus the costs not folded yet. Every reader of a
// batch's spend uses it, so none sees a completion twice or not at all.
const batchSpentSQL = `(b.spent_usd + coalesce((SELECT sum(s.cost_usd) FROM triage_spend_delta s WHERE s.batch = b.id), 0))`

// foldLockClass is the first key of FoldSpend's advisory lock ("spnd"); the
// second is the schema's hash, so per-test schemas on one server do not
// exclude each other.
const foldLockClass int32 = 0x73706e64

// FoldSpend moves the costs FinishAttempt appended into the running totals
// (triage_batch.spent_usd per batch, triage_key_spend per key) and returns
// how many it moved. Each cost moves exactly once: the rows are deleted by
// the statement that adds them up, and costs of transactions still open are
// not seen until a later fold. Every worker process calls it every few
// seconds; one at a time does the work (a transaction-scoped advisory lock),
// the others return 0 at once.
func FoldSpend(ctx context.Context, db DBTX) (int, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("ledger: fold spend: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	var mine bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext(current_schema()))`, foldLockClass).Scan(&mine); err != nil {
		return 0, fmt.Errorf("ledger: fold spend: lock: %w", err)
	}
	if !mine {
		return 0, nil
	}
	var n int
	err = tx.QueryRow(ctx, `WITH d AS (
		DELETE FROM triage_spend_delta RETURNING batch, key, cost_usd
	), b AS (
		UPDATE triage_batch t SET spent_usd = t.spent_usd + s.cost
		FROM (SELECT batch, sum(cost_usd) AS cost FROM d GROUP BY batch) s
		WHERE t.id = s.batch
	), k AS (
		INSERT INTO triage_key_spend AS t (key, spent_usd)
		SELECT key, sum(cost_usd) FROM d GROUP BY key
		ON CONFLICT (key) DO UPDATE SET spent_usd = t.spent_usd + EXCLUDED.spent_usd
	)
	SELECT count(*) FROM d`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("ledger: fold spend: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("ledger: fold spend: %w", err)
	}
	return n, nil
}

// KeySpend returns a key's billed spend over its whole history: its running
// total plus the costs not folded yet. Two index look-ups, however long the
// history.
func KeySpend(ctx context.Context, db DBTX, key string) (float64, error) {
	var spent float64
	err := db.QueryRow(ctx, `SELECT (coalesce((SELECT spent_usd FROM triage_key_spend WHERE key = $1), 0)
		+ coalesce((SELECT sum(cost_usd) FROM triage_spend_delta WHERE key = $1), 0))::float8`, key).Scan(&spent)
	if err != nil {
		return 0, fmt.Errorf("ledger: spend of key %q: %w", key, err)
	}
	return spent, nil
}
