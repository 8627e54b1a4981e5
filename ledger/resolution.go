package ledger

import (
	"context"
	"fmt"
)

// Resolution is how a call whose answer was lost (an attempt possibly
// billed, or an intent left by a run that died) came out: the column
// triage_attempt.resolution, "" on every attempt whose answer arrived.
// The ledger sets it: FinishAttempt (unknown), SettleFound (found),
// BeginAttempt of a retry (resent), AddDeadLetter (dead_lettered).
type Resolution string

const (
	// ResolutionUnknown: possibly billed, not resolved (yet): no look-up
	// found it, it was not sent again, its record is not dead-lettered.
	ResolutionUnknown Resolution = "unknown"
	// ResolutionFound: found in the provider's store by a look-up
	// (ambiguous = "lookup"), settled as billed once.
	ResolutionFound Resolution = "found"
	// ResolutionResent: sent again under the same idempotency key
	// (ambiguous = "retry", or a look-up that found nothing): possibly
	// billed twice unless the provider replayed it (status resolved).
	ResolutionResent Resolution = "resent"
	// ResolutionDeadLettered: its record was dead-lettered without sending
	// it again (ambiguous = "dead_letter", or its retries used up).
	ResolutionDeadLettered Resolution = "dead_lettered"
)

// lostSQL matches the attempts whose answer was lost and not found: a
// sync call possibly billed, or a sync call's intent (a batch-mode line's
// intent is a line in flight, not lost).
const lostSQL = `(status = 'possibly_billed' OR (status = 'intent' AND mode <> '` + ModeBatch + `'))`

// resentSQL marks, for a retry's intent ($7 its idempotency key, $9
// is_retry), the earlier lost answers under the key resent (a dead-lettered
// record requeued and sent again too).
const resentSQL = `UPDATE triage_attempt SET resolution = 'resent'
		WHERE $9 AND idempotency_key = $7 AND ` + lostSQL + `
			AND (resolution IS NULL OR resolution IN ('unknown', 'dead_lettered'))`

// LostAnswers counts a batch's lost answers by Resolution: what `triage
// status B` and the batch page report. An intent not resolved yet counts
// as unknown.
type LostAnswers struct {
	Found        int `json:"found"`
	Resent       int `json:"resent"`
	DeadLettered int `json:"dead_lettered"`
	Unknown      int `json:"unknown"`
}

// Total is how many answers were lost.
func (l LostAnswers) Total() int { return l.Found + l.Resent + l.DeadLettered + l.Unknown }

// BatchLostAnswers reads LostAnswers of one batch. A call in flight is an
// intent too: while the batch runs, unknown includes the calls in flight.
func BatchLostAnswers(ctx context.Context, db DBTX, batch string) (LostAnswers, error) {
	var l LostAnswers
	err := db.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE resolution = 'found'),
			count(*) FILTER (WHERE resolution = 'resent'),
			count(*) FILTER (WHERE resolution = 'dead_lettered'),
			count(*) FILTER (WHERE coalesce(resolution, 'unknown') = 'unknown' AND `+lostSQL+`)
		FROM triage_attempt WHERE batch = $1`, batch).Scan(&l.Found, &l.Resent, &l.DeadLettered, &l.Unknown)
	if err != nil {
		return LostAnswers{}, fmt.Errorf("ledger: lost answers of batch %q: %w", batch, err)
	}
	return l, nil
}
