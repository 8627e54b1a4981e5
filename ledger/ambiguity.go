package ledger

import (
	"context"
	"fmt"
)

// Ambiguity is how the calls whose answer was lost came out, per key:
// what the morning-after views report next to the key's ambiguous policy.
type Ambiguity struct {
	Key string `json:"key"`
	// Unanswered counts the attempts whose answer was lost: still possibly
	// billed (or an intent left by a dead run), or found by a look-up.
	Unanswered int `json:"unanswered"`
	// FoundByLookup: lost answers found in the provider's store, settled as
	// billed once (reason ReasonLookupFound).
	FoundByLookup int `json:"found_by_lookup"`
	// Resent, DeadLettered and Unknown count the other lost answers by
	// their Resolution (FoundByLookup is the fourth): sent again, left
	// with their record's dead letter, not resolved (yet; calls in flight
	// included).
	Resent       int `json:"resent"`
	DeadLettered int `json:"dead_lettered"`
	Unknown      int `json:"unknown"`
	// PossiblyDoubleBilled counts records with a possibly billed attempt
	// and at least one other attempt that may have been billed (ok,
	// possibly billed, or an intent): each may have been paid for twice.
	PossiblyDoubleBilled int `json:"possibly_double_billed"`
}

// AmbiguityByKey reads Ambiguity per key for the sync calls matching f
// (Batch and Key; RecordID and Limit are ignored), keys in name order.
func AmbiguityByKey(ctx context.Context, db DBTX, f AttemptFilter) ([]Ambiguity, error) {
	rows, err := db.Query(ctx, `WITH r AS (
		SELECT key, batch, record_id,
			count(*) FILTER (WHERE status IN ('possibly_billed', 'intent')) AS lost,
			count(*) FILTER (WHERE status = 'ok' AND reason = $3) AS found,
			count(*) FILTER (WHERE status IN ('ok', 'possibly_billed', 'intent')) AS maybe_billed,
			count(*) FILTER (WHERE resolution = 'resent') AS resent,
			count(*) FILTER (WHERE resolution = 'dead_lettered') AS dead,
			count(*) FILTER (WHERE status IN ('possibly_billed', 'intent') AND coalesce(resolution, 'unknown') = 'unknown') AS unknown
		FROM triage_attempt
		WHERE ($1 = '' OR batch = $1) AND ($2 = '' OR key = $2) AND mode <> '`+ModeBatch+`'
		GROUP BY key, batch, record_id
	)
	SELECT key, (sum(lost) + sum(found))::int, sum(found)::int,
		count(*) FILTER (WHERE lost > 0 AND maybe_billed > 1)::int,
		sum(resent)::int, sum(dead)::int, sum(unknown)::int
	FROM r GROUP BY key ORDER BY key`, f.Batch, f.Key, ReasonLookupFound)
	if err != nil {
		return nil, fmt.Errorf("ledger: ambiguity by key: %w", err)
	}
	defer rows.Close()
	var out []Ambiguity
	for rows.Next() {
		var a Ambiguity
		if err := rows.Scan(&a.Key, &a.Unanswered, &a.FoundByLookup, &a.PossiblyDoubleBilled,
			&a.Resent, &a.DeadLettered, &a.Unknown); err != nil {
			return nil, fmt.Errorf("ledger: ambiguity by key: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: ambiguity by key: %w", err)
	}
	return out, nil
}
