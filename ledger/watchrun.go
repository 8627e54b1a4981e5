package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// WatchRun is one key's safety-net runs as the whole fleet saw them
// (triage_watch_run): the current rejection streak (one failure
// fingerprint, the different records it rejected in a row) and the current
// run of throttles. Two processes each seeing half a storm add to the same
// run. The decision over it is the worker's (keys.DecideWatch); this only
// keeps it.
type WatchRun struct {
	Fingerprint string
	Records     []string
	// StreakSince is when the streak's first rejection was answered (nil:
	// no streak, or one written before it was kept).
	StreakSince *time.Time
	// ThrottleSince is when the run of throttles began (nil: none).
	ThrottleSince *time.Time
	Throttles     int
	ThrottleFP    string
}

// ChangeWatchRun reads key's run under a row lock, gives it to change, and
// stores what change returns, in one transaction: concurrent observers of
// one key, in any process, are applied one after the other.
func ChangeWatchRun(ctx context.Context, db DBTX, key string, change func(WatchRun) WatchRun) error {
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO triage_watch_run (key) VALUES ($1) ON CONFLICT (key) DO NOTHING`, key); err != nil {
			return err
		}
		var (
			run     WatchRun
			sinceNS *int64
		)
		if err := tx.QueryRow(ctx, `SELECT fingerprint, records, streak_since_ns, throttle_since, throttles, throttle_fp
			FROM triage_watch_run WHERE key = $1 FOR UPDATE`, key).
			Scan(&run.Fingerprint, &run.Records, &sinceNS, &run.ThrottleSince, &run.Throttles, &run.ThrottleFP); err != nil {
			return err
		}
		if sinceNS != nil && len(run.Records) > 0 {
			since := time.Unix(0, *sinceNS).UTC()
			run.StreakSince = &since
		}
		next := change(run)
		if next.Records == nil {
			next.Records = []string{}
		}
		sinceNS = nil
		if next.StreakSince != nil && len(next.Records) > 0 {
			ns := next.StreakSince.UnixNano()
			sinceNS = &ns
		}
		_, err := tx.Exec(ctx, `UPDATE triage_watch_run SET fingerprint = $2, records = $3, streak_since_ns = $4,
			throttle_since = $5, throttles = $6, throttle_fp = $7, updated_at = now() WHERE key = $1`,
			key, next.Fingerprint, next.Records, sinceNS, next.ThrottleSince, next.Throttles, next.ThrottleFP)
		return err
	})
	if err != nil {
		return fmt.Errorf("ledger: watch run of key %s: %w", key, err)
	}
	return nil
}

// ResetWatchRun ends key's runs for a success answered at answeredAt,
// anywhere in the fleet. A run that began after answeredAt goes on: the
// success came before its first throttle or rejection, and its report (a
// completion's write) can land seconds after the answer on a busy worker,
// which would hold a wall of throttles or a streak of rejections seconds
// late, dozens of requests to a dead account later (as keys.DecideWatch
// decides for one process). One statement that writes only when there is
// a run to end, so a healthy key's successes cost an index look-up each.
func ResetWatchRun(ctx context.Context, db DBTX, key string, answeredAt time.Time) error {
	if _, err := db.Exec(ctx, resetWatchRunSQL, key, answeredAt, answeredAt.UnixNano()); err != nil {
		return fmt.Errorf("ledger: reset watch run of key %s: %w", key, err)
	}
	return nil
}

// QueueResetWatchRun queues ResetWatchRun on b: the worker sends it in the
// round trip of the successful call's completion.
func QueueResetWatchRun(b *pgx.Batch, key string, answeredAt time.Time) {
	b.Queue(resetWatchRunSQL, key, answeredAt, answeredAt.UnixNano())
}

// resetWatchRunSQL: $1 key, $2 when the success was answered, $3 the same
// in unix nanoseconds. "later": the run began after it, and stays.
const resetWatchRunSQL = `UPDATE triage_watch_run
		SET fingerprint = CASE WHEN ` + streakLaterSQL + ` THEN fingerprint ELSE '' END,
			records = CASE WHEN ` + streakLaterSQL + ` THEN records ELSE '{}' END,
			streak_since_ns = CASE WHEN ` + streakLaterSQL + ` THEN streak_since_ns END,
			throttle_since = CASE WHEN throttle_since > $2 THEN throttle_since END,
			throttles = CASE WHEN throttle_since > $2 THEN throttles ELSE 0 END,
			throttle_fp = CASE WHEN throttle_since > $2 THEN throttle_fp ELSE '' END,
			updated_at = now()
		WHERE key = $1 AND ((cardinality(records) > 0 AND NOT ` + streakLaterSQL + `)
			OR (throttles > 0 AND coalesce(throttle_since <= $2, true)))`

// streakLaterSQL: the streak's first rejection was answered after $3 (a
// streak stored without its start is ended by any success).
const streakLaterSQL = `coalesce(streak_since_ns > $3, false)`
