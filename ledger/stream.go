package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Partial is what a stream cut midway delivered, kept on its attempt: the
// text, and (in the Outcome's tokens and cost) what it used. The provider
// may have gone on generating after the cut, so the attempt stays possibly
// billed for the rest of its estimate.
type Partial struct {
	// Text received before the cut ("" is kept as "": the stream started).
	Text string
	// RestEstimateUSD replaces the intent's est_cost_usd: the part of the
	// estimate not yet counted in the outcome's CostUSD, so that billed plus
	// possibly billed is the estimate, never more.
	RestEstimateUSD float64
}

func (p *Partial) text() *string {
	if p == nil {
		return nil
	}
	return &p.Text
}

func (p *Partial) rest() *float64 {
	if p == nil {
		return nil
	}
	r := max(p.RestEstimateUSD, 0)
	return &r
}

// LatestPartial returns the partial text of a job's latest cut stream, for
// `triage dlq show`; ok is false when none of its attempts was a cut stream.
func LatestPartial(ctx context.Context, db DBTX, jobID int64) (text string, outputTokens int, ok bool, err error) {
	err = db.QueryRow(ctx, `SELECT partial_text, output_tokens FROM triage_attempt
		WHERE job_id = $1 AND partial_text IS NOT NULL ORDER BY id DESC LIMIT 1`, jobID).Scan(&text, &outputTokens)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("ledger: partial of job %d: %w", jobID, err)
	}
	return text, outputTokens, true, nil
}

// PartialAttempt is an attempt whose stream was cut midway (`triage ledger`).
type PartialAttempt struct {
	AttemptID    int64         `json:"attempt_id"`
	Batch        string        `json:"batch"`
	RecordID     string        `json:"record_id"`
	Status       AttemptStatus `json:"status"`
	Accepted     bool          `json:"accepted"` // stored as the record's result
	OutputTokens int           `json:"output_tokens"`
	CostUSD      float64       `json:"cost_usd"`
	Text         string        `json:"text"`
}

// ListPartials returns the attempts matching f whose stream was cut midway,
// newest first, at most f.Limit (0: AttemptLimitDefault).
func ListPartials(ctx context.Context, db DBTX, f AttemptFilter) ([]PartialAttempt, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = AttemptLimitDefault
	}
	rows, err := db.Query(ctx, `SELECT a.id, a.batch, a.record_id, a.status, r.attempt_id IS NOT NULL,
			a.output_tokens, a.cost_usd::float8, a.partial_text
		FROM triage_attempt a
		LEFT JOIN triage_result r ON r.attempt_id = a.id
		WHERE a.partial_text IS NOT NULL AND ($1 = '' OR a.batch = $1) AND ($2 = '' OR a.key = $2)
		ORDER BY a.id DESC
		LIMIT $3`, f.Batch, f.Key, limit)
	if err != nil {
		return nil, fmt.Errorf("ledger: list partials: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PartialAttempt, error) {
		var p PartialAttempt
		err := r.Scan(&p.AttemptID, &p.Batch, &p.RecordID, &p.Status, &p.Accepted, &p.OutputTokens, &p.CostUSD, &p.Text)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: list partials: %w", err)
	}
	return out, nil
}
