package ledger

import (
	"context"
	"fmt"
)

// ModelUsage is what the calls on one model came to: with fallback models
// a batch's records can be answered by more than one.
type ModelUsage struct {
	Model string `json:"model"`
	Key   string `json:"key"`
	Calls int    `json:"calls"`
	// Answered counts the records whose stored result this model gave.
	Answered int     `json:"answered"`
	SpendUSD float64 `json:"spend_usd"`
}

// UsageByModel sums the attempts matched by f per model and key, ordered
// by model and key.
func UsageByModel(ctx context.Context, db DBTX, f AttemptFilter) ([]ModelUsage, error) {
	rows, err := db.Query(ctx, `SELECT a.model, a.key, count(*), count(r.attempt_id), coalesce(sum(a.cost_usd), 0)::float8
		FROM triage_attempt a
		LEFT JOIN triage_result r ON r.attempt_id = a.id
		WHERE ($1 = '' OR a.batch = $1) AND ($2 = '' OR a.key = $2)
		GROUP BY a.model, a.key
		ORDER BY a.model, a.key`, f.Batch, f.Key)
	if err != nil {
		return nil, fmt.Errorf("ledger: usage by model: %w", err)
	}
	defer rows.Close()
	out := []ModelUsage{}
	for rows.Next() {
		var u ModelUsage
		if err := rows.Scan(&u.Model, &u.Key, &u.Calls, &u.Answered, &u.SpendUSD); err != nil {
			return nil, fmt.Errorf("ledger: usage by model: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: usage by model: %w", err)
	}
	return out, nil
}
