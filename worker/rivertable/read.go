package rivertable

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// QueuePaused reads queue's river_queue row: whether it is paused, and
// whether it exists (River creates it when a client first works the queue).
func QueuePaused(ctx context.Context, db DBTX, schema, queue string) (paused, exists bool, err error) {
	err = db.QueryRow(ctx, `SELECT paused_at IS NOT NULL FROM `+Queue(schema)+` WHERE name = $1`, queue).Scan(&paused)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return paused, true, nil
}

// LockNextProbeJob locks (FOR UPDATE SKIP LOCKED, until db's transaction
// ends) the available job of queue to send a key's probe, and returns its
// id, or 0 when none is available. Jobs that cannot call come last: fewer
// than attemptsLeft attempts left, or created before maxAge (nil: no age
// limit). Then River's order: priority, scheduled_at, id.
func LockNextProbeJob(ctx context.Context, db DBTX, schema, queue string, attemptsLeft int, maxAge *time.Time) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, `
SELECT id FROM `+Job(schema)+`
WHERE queue = $1 AND state = 'available'
ORDER BY (max_attempts - attempt < $2 OR created_at < coalesce($3::timestamptz, '-infinity')), priority, scheduled_at, id
LIMIT 1
FOR UPDATE SKIP LOCKED`, queue, attemptsLeft, maxAge).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return id, err
}
