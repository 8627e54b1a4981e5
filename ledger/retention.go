package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Retention: the statements that prune the rows of finished work. Each
// deletes at most PruneChunk rows in its own short transaction, so a prune
// of a month of nights never holds a lock for long nor grows one
// transaction with the whole history. Nothing an unsettled batch can still
// use is touched: open lines and the provider batches that hold them,
// attempts not finished, dead letters not requeued; a paid answer held
// for a requeue (its job gone by hand) is kept for the age, then closed.
// Of the attempts only failed calls that billed nothing go (pruneAttempts),
// so what the ledger reports as spent and the tokens never change.

// PruneChunk is how many rows one prune statement deletes at most.
const PruneChunk = 1000

// Pruned counts what one prune pass removed.
type Pruned struct {
	// Stripped: closed batch lines whose request body was dropped (lines
	// closed while their provider batch was still live).
	Stripped int
	// ProviderBatches and Lines: collected or abandoned provider batches,
	// with their (closed) lines, and closed lines that never joined one.
	ProviderBatches, Lines int
	// Alerts and DeadLetters (requeued ones only).
	Alerts, DeadLetters int
	// HeldAnswers: paid answers of jobs gone by hand, held for a requeue
	// that did not come within the age, closed.
	HeldAnswers int
	// PaceHistory: a key's pace points (triage_pace_history) older than
	// the age.
	PaceHistory int
	// Attempts: failed calls that billed nothing, of records answered
	// before the cutoff (pruneAttempts).
	Attempts int
}

// Total is the number of rows changed.
func (p Pruned) Total() int {
	return p.Stripped + p.ProviderBatches + p.Lines + p.Alerts + p.DeadLetters + p.HeldAnswers + p.PaceHistory + p.Attempts
}

// PruneCutoffs are the moments before which rows are old enough to go.
type PruneCutoffs struct {
	// Finished applies to alerts, provider batches (their end), the
	// keys' pace history and attempts (their end, and their record's
	// result).
	Finished time.Time
	// Requeued applies to dead letters, by when they were requeued.
	Requeued time.Time
	// Now: closed lines created before it lose their body once their
	// provider batch is collected.
	Now time.Time
}

// pruneLockClass is the first key of the prune's advisory lock ("prun");
// the second is the schema's hash, as for FoldSpend.
const pruneLockClass int32 = 0x7072756e

// TryPruneLock takes the fleet's prune lock on conn (a session lock: the
// prune runs many transactions). It reports false when another process
// holds it; the caller then skips its pass. PruneUnlock releases it.
func TryPruneLock(ctx context.Context, conn DBTX) (bool, error) {
	var mine bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext(current_schema()))`, pruneLockClass).Scan(&mine); err != nil {
		return false, fmt.Errorf("ledger: prune lock: %w", err)
	}
	return mine, nil
}

// PruneUnlock releases TryPruneLock's lock.
func PruneUnlock(ctx context.Context, conn DBTX) error {
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, pruneLockClass); err != nil {
		return fmt.Errorf("ledger: prune unlock: %w", err)
	}
	return nil
}

// pruneStatements are the steps of a pass, in order, each run in chunks
// until it changes fewer than PruneChunk rows. $1 is the step's cutoff
// (its cutoff function's), $2 the chunk.
var pruneStatements = []struct {
	name   string
	sql    string
	cutoff func(PruneCutoffs) time.Time
	add    func(*Pruned, int)
}{
	// Paid answers held for a requeue that never came (their job gone,
	// their attempt settled by the submitter, ReasonJobGone): closed once
	// held longer than the cutoff, so the steps below can drop them. A
	// requeue restarts the hold (AdoptBatchLine).
	{"held answers", `UPDATE triage_provider_batch_line SET ` + CloseLineSQL + `
		WHERE id IN (SELECT l.id FROM triage_provider_batch_line l
			JOIN triage_attempt a ON a.id = l.attempt_id
			WHERE l.state <> 'applied' AND l.state = '` + LineAnswered + `' AND a.status <> 'intent'
			  AND l.answered_at < $1
			LIMIT $2)`,
		finished, func(p *Pruned, n int) { p.HeldAnswers += n }},
	{"strip closed lines", `UPDATE triage_provider_batch_line SET body = 'null'::jsonb, observation = NULL
		WHERE id IN (SELECT l.id FROM triage_provider_batch_line l
			LEFT JOIN triage_provider_batch pb ON pb.id = l.provider_batch
			WHERE l.state = 'applied' AND (l.body <> 'null'::jsonb OR l.observation IS NOT NULL)
			  AND (pb.id IS NULL OR pb.state IN ('collected', 'abandoned'))
			  AND l.created_at < $1
			LIMIT $2)`,
		stripCutoff, func(p *Pruned, n int) { p.Stripped += n }},
	// Lines of provider batches that ended before the cutoff and hold no
	// open line, then closed lines that never joined a provider batch.
	{"provider batch lines", `DELETE FROM triage_provider_batch_line WHERE id IN (
			SELECT l.id FROM triage_provider_batch_line l
			JOIN triage_provider_batch pb ON pb.id = l.provider_batch
			WHERE pb.state IN ('collected', 'abandoned')
			  AND coalesce(pb.collected_at, pb.ended_at, pb.created_at) < $1
			  AND NOT EXISTS (SELECT 1 FROM triage_provider_batch_line o
				WHERE o.provider_batch = pb.id AND o.state <> 'applied')
			LIMIT $2)`,
		finished, func(p *Pruned, n int) { p.Lines += n }},
	{"unsent closed lines", `DELETE FROM triage_provider_batch_line WHERE id IN (
			SELECT l.id FROM triage_provider_batch_line l
			WHERE l.provider_batch IS NULL AND l.state = 'applied' AND l.created_at < $1
			LIMIT $2)`,
		finished, func(p *Pruned, n int) { p.Lines += n }},
	{"provider batches", `DELETE FROM triage_provider_batch WHERE id IN (
			SELECT pb.id FROM triage_provider_batch pb
			WHERE pb.state IN ('collected', 'abandoned')
			  AND coalesce(pb.collected_at, pb.ended_at, pb.created_at) < $1
			  AND NOT EXISTS (SELECT 1 FROM triage_provider_batch_line l WHERE l.provider_batch = pb.id)
			  AND NOT EXISTS (SELECT 1 FROM triage_provider_batch s WHERE s.stray_of = pb.id)
			LIMIT $2)`,
		finished, func(p *Pruned, n int) { p.ProviderBatches += n }},
	{"alerts", `DELETE FROM triage_alert WHERE id IN (
			SELECT id FROM triage_alert WHERE created_at < $1 ORDER BY id LIMIT $2)`,
		finished, func(p *Pruned, n int) { p.Alerts += n }},
	{"pace history", `DELETE FROM triage_pace_history WHERE (key, at) IN (
			SELECT key, at FROM triage_pace_history WHERE at < $1 ORDER BY at LIMIT $2)`,
		finished, func(p *Pruned, n int) { p.PaceHistory += n }},
	// A dead letter still in force (never requeued) is kept: it is what
	// the operator has to look at, and its batch counts it as settled.
	{"requeued dead letters", `DELETE FROM triage_dead_letter WHERE id IN (
			SELECT id FROM triage_dead_letter WHERE requeued_at < $1 ORDER BY id LIMIT $2)`,
		func(c PruneCutoffs) time.Time { return c.Requeued }, func(p *Pruned, n int) { p.DeadLetters += n }},
}

func finished(c PruneCutoffs) time.Time { return c.Finished }

// stripCutoff is the strip step's cutoff: a closed line's body goes as soon as
// its provider batch is collected, whatever its age.
func stripCutoff(c PruneCutoffs) time.Time { return c.Now }

// Prune runs one pass: every step in chunks of PruneChunk rows, each chunk
// its own transaction on db. Call it holding TryPruneLock. It stops at
// ctx's end with what it did so far.
func Prune(ctx context.Context, db DBTX, cut PruneCutoffs) (Pruned, error) {
	var p Pruned
	for _, st := range pruneStatements {
		for {
			if err := ctx.Err(); err != nil {
				return p, err
			}
			tag, err := db.Exec(ctx, st.sql, st.cutoff(cut), PruneChunk)
			if err != nil {
				return p, fmt.Errorf("ledger: prune %s: %w", st.name, err)
			}
			n := int(tag.RowsAffected())
			st.add(&p, n)
			if n < PruneChunk {
				break
			}
		}
	}
	n, err := pruneAttempts(ctx, db, cut.Finished)
	p.Attempts += n
	return p, err
}

// pruneAttemptsSQL deletes, of one page of PruneChunk candidates after
// the key ($3, $4) in the order of the triage_attempt_failed_unbilled
// index, the attempts nothing needs any more: failed calls that billed
// nothing (no cost, no tokens), finished before $1, of a record whose
// result was stored before $1, with no attempt in flight or possibly
// billed (an unsettled intent, a lost answer a look-up may still settle)
// and no provider-batch line referring to them. The call that answered
// (the result's attempt), calls that billed, lost answers and every
// attempt of a record without a result (a requeue of its dead letter
// reads its history) stay. It returns how many went, the page's size and
// its last key.
const pruneAttemptsSQL = `WITH page AS (
		SELECT id, finished_at FROM triage_attempt
		WHERE status = 'failed' AND cost_usd = 0 AND input_tokens = 0 AND output_tokens = 0
		  AND finished_at < $1 AND (finished_at, id) > ($3, $4)
		ORDER BY finished_at, id LIMIT $2
	), gone AS (
		DELETE FROM triage_attempt a USING page
		WHERE a.id = page.id
		  AND EXISTS (SELECT 1 FROM triage_result r
			WHERE r.batch = a.batch AND r.record_id = a.record_id AND r.completed_at < $1)
		  AND NOT EXISTS (SELECT 1 FROM triage_attempt o
			WHERE o.batch = a.batch AND o.record_id = a.record_id AND o.status IN ('intent', 'possibly_billed'))
		  AND NOT EXISTS (SELECT 1 FROM triage_provider_batch_line l WHERE l.attempt_id = a.id)
		RETURNING a.id
	), last AS (
		SELECT finished_at, id FROM page ORDER BY finished_at DESC, id DESC LIMIT 1
	)
	SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM page), last.finished_at, last.id
	FROM last`

// pruneAttempts walks the candidate attempts finished before cutoff in
// pages of PruneChunk (keyset order, so candidates kept are read once a
// pass), each page's delete its own transaction, and returns how many went.
func pruneAttempts(ctx context.Context, db DBTX, cutoff time.Time) (int, error) {
	var (
		total  int
		lastAt time.Time // before every finished_at
		lastID int64
	)
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var gone, seen int
		err := db.QueryRow(ctx, pruneAttemptsSQL, cutoff, PruneChunk, lastAt, lastID).Scan(&gone, &seen, &lastAt, &lastID)
		if errors.Is(err, pgx.ErrNoRows) {
			return total, nil // an empty page
		}
		if err != nil {
			return total, fmt.Errorf("ledger: prune attempts: %w", err)
		}
		total += gone
		if seen < PruneChunk {
			return total, nil
		}
	}
}

// TableSize is the disk one ledger table uses.
type TableSize struct {
	Table string `json:"table"`
	// Rows is PostgreSQL's estimate (pg_class.reltuples; -1 before the
	// table was first analyzed).
	Rows int64 `json:"rows_estimate"`
	// Bytes is the table with its indexes and TOAST.
	Bytes int64 `json:"bytes"`
}

// TableSizes returns the size of each triage_* table and of River's job
// table in the current schema, largest first.
func TableSizes(ctx context.Context, db DBTX) ([]TableSize, error) {
	rows, err := db.Query(ctx, `SELECT c.relname::text, c.reltuples::bigint, pg_total_relation_size(c.oid)
		FROM pg_class c
		WHERE c.relkind = 'r' AND (c.relname LIKE 'triage\_%' OR c.relname = 'river_job')
		  AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
		ORDER BY 3 DESC, 1`)
	if err != nil {
		return nil, fmt.Errorf("ledger: table sizes: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[TableSize])
	if err != nil {
		return nil, fmt.Errorf("ledger: table sizes: %w", err)
	}
	return out, nil
}
