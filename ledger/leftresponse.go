package ledger

import (
	"context"
	"fmt"
)

// Reasons of an attempt whose background response was left running at the
// provider for a record no longer wanted (dead-lettered ReasonCancelled),
// once the worker's pass settled it (SettleLeftResponse):
const (
	// ReasonResponseCancelled: cancelled at the provider before it ended;
	// nothing billed but what the provider reported (none, as a rule).
	ReasonResponseCancelled = "response_cancelled"
	// ReasonResponseEndedUnwanted: it ended (completed, failed or
	// incomplete) before the cancel reached it, so it was billed: its
	// usage is the attempt's cost, its answer unused.
	ReasonResponseEndedUnwanted = "response_ended_unwanted"
)

// LeftResponse is a background response (OpenAI Responses API) an attempt
// created and lost (a run stopped or died while it ran), still unsettled
// in the ledger, whose record was dead-lettered cancelled (`triage batch
// cancel` found its job queued, so no run of it will poll or cancel it):
// the answer is no longer wanted.
type LeftResponse struct {
	Key, Model, ResponseID string
	Batch, RecordID        string
}

// LeftResponses returns up to limit background responses left running for
// records dead-lettered cancelled (LeftResponse), oldest first, one row per
// key and response id however many attempts lost it. A record dead-lettered
// so has no job left running: its queued jobs were cancelled with the
// dead letter, and a run that was in flight dead-letters it only after its
// own call ended; a requeued record (requeued_at set) is not here.
func LeftResponses(ctx context.Context, db DBTX, limit int) ([]LeftResponse, error) {
	rows, err := db.Query(ctx, `SELECT a.key, max(a.model), a.response_id, max(a.batch), max(a.record_id)
		FROM triage_attempt a
		WHERE a.response_id IS NOT NULL AND a.status IN ('intent', 'possibly_billed')
		  AND EXISTS (SELECT 1 FROM triage_dead_letter d
			WHERE d.batch = a.batch AND d.record_id = a.record_id AND d.reason = $1 AND d.requeued_at IS NULL)
		GROUP BY a.key, a.response_id
		ORDER BY min(a.id)
		LIMIT $2`, ReasonCancelled, limit)
	if err != nil {
		return nil, fmt.Errorf("ledger: left background responses: %w", err)
	}
	defer rows.Close()
	var out []LeftResponse
	for rows.Next() {
		var l LeftResponse
		if err := rows.Scan(&l.Key, &l.Model, &l.ResponseID, &l.Batch, &l.RecordID); err != nil {
			return nil, fmt.Errorf("ledger: left background responses: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: left background responses: %w", err)
	}
	return out, nil
}

// LeftOutcome is what became of a left response at the provider: its
// reason (ReasonResponseCancelled or ReasonResponseEndedUnwanted) and the
// usage the provider reported, priced.
type LeftOutcome struct {
	Reason                    string
	InputTokens, OutputTokens int
	CostUSD                   float64
}

// SettleLeftResponse settles the unsettled attempts under key that lost
// the background response responseID. The newest carries the outcome:
// status failed, the reason, the usage and its cost (counted in the
// spend, once); the older ones, which lost the same response, become
// resolved. Resolution: found when the response ended billed (its answer
// was found by its id), dead_lettered when it was cancelled. It returns
// how many attempts it settled: 0 when another process settled them first
// (the statement is safe to run from several processes at once), or when
// the record was requeued since LeftResponses (its new job polls the id).
func SettleLeftResponse(ctx context.Context, db DBTX, key, responseID string, out LeftOutcome) (int, error) {
	resolution := ResolutionDeadLettered
	if out.Reason == ReasonResponseEndedUnwanted {
		resolution = ResolutionFound
	}
	var n int
	err := db.QueryRow(ctx, `WITH target AS (
		SELECT a.id, a.cost_usd AS old_cost FROM triage_attempt a
		WHERE a.key = $1 AND a.response_id = $2 AND a.status IN ('possibly_billed', 'intent')
		  AND EXISTS (SELECT 1 FROM triage_dead_letter d
			WHERE d.batch = a.batch AND d.record_id = a.record_id AND d.reason = $8 AND d.requeued_at IS NULL)
		ORDER BY a.id DESC LIMIT 1 FOR UPDATE OF a
	), older AS (
		UPDATE triage_attempt SET status = 'resolved', resolution = $7, finished_at = coalesce(finished_at, now())
		WHERE key = $1 AND response_id = $2 AND status IN ('possibly_billed', 'intent') AND id < (SELECT id FROM target)
		RETURNING id
	), upd AS (
		UPDATE triage_attempt a SET status = 'failed', class = coalesce(a.class, 'ambiguous'), reason = $3, resolution = $7,
			input_tokens = $4, output_tokens = $5, cost_usd = $6, finished_at = coalesce(a.finished_at, now())
		FROM target WHERE a.id = target.id
		RETURNING a.batch, a.key, a.cost_usd - target.old_cost AS delta
	), spend AS (
		INSERT INTO triage_spend_delta (batch, key, cost_usd)
		SELECT batch, key, delta FROM upd WHERE delta <> 0
	)
	SELECT (SELECT count(*) FROM upd) + (SELECT count(*) FROM older)`,
		key, responseID, out.Reason, out.InputTokens, out.OutputTokens, out.CostUSD, string(resolution), ReasonCancelled).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("ledger: settle left background response: %w", err)
	}
	return n, nil
}
