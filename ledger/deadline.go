package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AutoMargin is one auto pipeline and how long before its batches'
// deadline their lines leave the Batch API for synchronous calls.
type AutoMargin struct {
	Pipeline string
	Margin   time.Duration
}

// The auto-mode deadline check runs every submitter tick (seconds), per key
// and per process, while provider batches hold up to 50,000 lines each. Its
// statements read what they need and no more: the triage batches whose
// deadline is near first (no line is read when there is none, the common
// case), then the open lines of those batches only, reached through their
// open attempts (triage_attempt_open) and the one open line of each job
// (triage_provider_batch_line_open_job), never by scanning the lines of
// the provider batches.

// NearDeadlineBatches returns the triage batches of the auto pipelines whose
// deadline falls within the pipeline's margin of now and that still have
// attempts open (intent or possibly billed): a batch whose work is all
// settled needs nothing more.
func NearDeadlineBatches(ctx context.Context, db DBTX, auto []AutoMargin, now time.Time) ([]string, error) {
	if len(auto) == 0 {
		return nil, nil
	}
	names := make([]string, len(auto))
	secs := make([]float64, len(auto))
	for i, a := range auto {
		names[i], secs[i] = a.Pipeline, a.Margin.Seconds()
	}
	rows, err := db.Query(ctx, `SELECT tb.id FROM triage_batch tb
		JOIN unnest($1::text[], $2::float8[]) AS m(pipeline, margin) ON m.pipeline = tb.pipeline
		WHERE tb.deadline IS NOT NULL AND tb.deadline < $3::timestamptz + make_interval(secs => m.margin)
		  AND EXISTS (SELECT 1 FROM triage_attempt a WHERE a.batch = tb.id AND a.status IN ('intent', 'possibly_billed'))
		ORDER BY tb.id`, names, secs, now)
	if err != nil {
		return nil, fmt.Errorf("ledger: batches near their deadline: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("ledger: batches near their deadline: %w", err)
	}
	return ids, nil
}

// nearLinesSQL selects the open lines of key that belong to the triage
// batches $2, through their open attempts: $1 key, $2 the batches.
const nearLinesSQL = `SELECT l.provider_batch, l.job_id, l.state FROM triage_attempt a
		JOIN triage_provider_batch_line l ON l.job_id = a.job_id AND l.state <> 'applied'
		WHERE a.batch = ANY($2::text[]) AND a.status IN ('intent', 'possibly_billed')
		  AND l.batch = a.batch AND l.key = $1`

// RequestDeadlineCancels asks for the cancel of key's live provider batches
// holding a line of one of batches (NearDeadlineBatches) and returns how
// many it asked for. Only a submitted row's next poll is brought forward
// (to now): an intent or uploaded row's next_poll_at is the lease of a
// create that may be in flight (its fencing token), and the cancel is sent
// at its first poll.
func RequestDeadlineCancels(ctx context.Context, db DBTX, key string, batches []string, now time.Time) (int64, error) {
	if len(batches) == 0 {
		return 0, nil
	}
	tag, err := db.Exec(ctx, `UPDATE triage_provider_batch pb SET cancel_requested = true,
			next_poll_at = CASE WHEN pb.state = 'submitted' THEN least(pb.next_poll_at, $3) ELSE pb.next_poll_at END
		WHERE pb.key = $1 AND pb.state IN ('intent', 'uploaded', 'submitted') AND NOT pb.cancel_requested
		  AND pb.id IN (SELECT n.provider_batch FROM (`+nearLinesSQL+`) n WHERE n.state = 'submitted')`,
		key, batches, now)
	if err != nil {
		return 0, fmt.Errorf("ledger: deadline cancels: %w", err)
	}
	return tag.RowsAffected(), nil
}

// NearDeadlineWaitingJobs returns the River jobs of key's lines of batches
// (NearDeadlineBatches) that wait for a provider batch (pending) or for
// their job to send them again (not run): woken, they take their lines
// back and call synchronously.
func NearDeadlineWaitingJobs(ctx context.Context, db DBTX, key string, batches []string) ([]int64, error) {
	if len(batches) == 0 {
		return nil, nil
	}
	rows, err := db.Query(ctx, `SELECT n.job_id FROM (`+nearLinesSQL+`) n
		WHERE n.state IN ('pending', 'not_run') ORDER BY n.job_id`, key, batches)
	if err != nil {
		return nil, fmt.Errorf("ledger: waiting jobs near their deadline: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("ledger: waiting jobs near their deadline: %w", err)
	}
	return ids, nil
}
