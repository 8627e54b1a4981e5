package ledger

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// What a person sees of pipelines in mode "batch" or "auto": the provider
// batches in flight, spend split by how the calls reached the model, and
// cancel requests. The submitter (the worker) writes the rows; this file
// only reads them, and sets cancel_requested for `triage batch cancel`.

// ProviderBatchStatus is one provider batch in flight, an element of
// "provider_batches" in `triage status --json` (add fields, never rename or
// remove them). Times are RFC 3339; null means "not yet".
type ProviderBatchStatus struct {
	// ID is triage's own id of the provider batch (triage_provider_batch).
	ID     int64  `json:"id"`
	Key    string `json:"key"`
	Vendor string `json:"vendor"`
	Model  string `json:"model"`
	// State is triage's: intent, uploaded, submitted or ended (results
	// being collected).
	State string `json:"state"`
	// ProviderBatchID is the vendor's id (batch_…, msgbatch_…); null until
	// the provider has accepted the batch.
	ProviderBatchID *string `json:"provider_batch_id"`
	// VendorStatus is the vendor's own word as last polled (validating,
	// in_progress, finalizing, canceling, ...); null before the first poll.
	VendorStatus *string `json:"vendor_status"`
	// Counts is the vendor's request_counts as last polled, as the vendor
	// names them (OpenAI total/completed/failed; Anthropic processing/
	// succeeded/errored/canceled/expired); {} before the first poll.
	Counts json.RawMessage `json:"counts"`
	// Lines is how many requests the provider batch holds; BatchLines how
	// many of them are this triage batch's (a provider batch may mix the
	// lines of several batches of one key and model).
	Lines      int `json:"lines"`
	BatchLines int `json:"batch_lines"`
	// CancelRequested: `triage batch cancel` (or auto mode near the
	// deadline) asked for it; the key's submitter performs the cancel.
	CancelRequested bool       `json:"cancel_requested"`
	CreatedAt       time.Time  `json:"created_at"`
	SubmittedAt     *time.Time `json:"submitted_at"`
	ExpiresAt       *time.Time `json:"expires_at"`
	EndedAt         *time.Time `json:"ended_at"`
	// AgeS is the seconds since it was submitted (created, before that);
	// ExpiresInS the seconds until the provider expires it (negative once
	// past), null when no expiry is known. Both by the database's clock,
	// so every machine of a fleet reads the same.
	AgeS       int64  `json:"age_s"`
	ExpiresInS *int64 `json:"expires_in_s"`
	// LastError is why the submitter's last step on it (upload, create,
	// poll, cancel, download) failed, status and vendor code only; null once
	// a step succeeds. The submitter retries with backoff: meanwhile
	// VendorStatus is stale, and this says why.
	LastError *string `json:"last_error"`
}

// providerOpenSQL is a provider batch still in flight, over a
// triage_provider_batch row aliased pb.
const providerOpenSQL = `pb.state NOT IN ('collected', 'abandoned')`

// providerBatchesInFlight returns, per triage batch, the open provider
// batches holding its lines, oldest first: for the batches named, or for
// every batch when batches is nil.
func providerBatchesInFlight(ctx context.Context, db DBTX, batches []string) (map[string][]ProviderBatchStatus, error) {
	rows, err := db.Query(ctx, `SELECT l.batch, pb.id, pb.key, pb.vendor, pb.model, pb.state, pb.provider_batch_id,
			pb.vendor_status, pb.counts, pb.lines, count(*), pb.cancel_requested,
			pb.created_at, pb.submitted_at, pb.expires_at, pb.ended_at,
			floor(extract(epoch FROM now() - coalesce(pb.submitted_at, pb.created_at)))::bigint,
			floor(extract(epoch FROM pb.expires_at - now()))::bigint, pb.last_error
		FROM triage_provider_batch pb
		JOIN triage_provider_batch_line l ON l.provider_batch = pb.id
		WHERE `+providerOpenSQL+` AND ($1::text[] IS NULL OR l.batch = ANY($1))
		GROUP BY l.batch, pb.id
		ORDER BY l.batch, pb.created_at, pb.id`, batches)
	if err != nil {
		return nil, fmt.Errorf("ledger: provider batches in flight: %w", err)
	}
	defer rows.Close()
	out := map[string][]ProviderBatchStatus{}
	for rows.Next() {
		var (
			batch string
			p     ProviderBatchStatus
		)
		if err := rows.Scan(&batch, &p.ID, &p.Key, &p.Vendor, &p.Model, &p.State, &p.ProviderBatchID,
			&p.VendorStatus, &p.Counts, &p.Lines, &p.BatchLines, &p.CancelRequested,
			&p.CreatedAt, &p.SubmittedAt, &p.ExpiresAt, &p.EndedAt, &p.AgeS, &p.ExpiresInS, &p.LastError); err != nil {
			return nil, fmt.Errorf("ledger: provider batches in flight: %w", err)
		}
		out[batch] = append(out[batch], p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: provider batches in flight: %w", err)
	}
	return out, nil
}

// batchLinesUnsent counts, per triage batch, the batch-mode lines waiting
// for the key's submitter to put them in a provider batch (pending): for the
// batches named, or for every batch when batches is nil. The state <> 'applied'
// term lets the planner read the small partial index of open lines instead
// of every line ever written.
func batchLinesUnsent(ctx context.Context, db DBTX, batches []string) (map[string]int, error) {
	rows, err := db.Query(ctx, `SELECT l.batch, count(*) FROM triage_provider_batch_line l
		WHERE l.state <> 'applied' AND l.state = 'pending' AND ($1::text[] IS NULL OR l.batch = ANY($1))
		GROUP BY l.batch`, batches)
	if err != nil {
		return nil, fmt.Errorf("ledger: batch lines unsent: %w", err)
	}
	out := map[string]int{}
	for rows.Next() {
		var (
			batch string
			n     int
		)
		if err := rows.Scan(&batch, &n); err != nil {
			return nil, fmt.Errorf("ledger: batch lines unsent: %w", err)
		}
		out[batch] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: batch lines unsent: %w", err)
	}
	return out, nil
}

// CancelRequest is one provider batch `triage batch cancel` asked to cancel.
type CancelRequest struct {
	ID int64 `json:"id"`
	// ProviderBatchID is the vendor's id; nil when the batch has not reached
	// the provider yet.
	ProviderBatchID *string `json:"provider_batch_id"`
	Vendor          string  `json:"vendor"`
	State           string  `json:"state"`
	// Already: a cancel had been requested before.
	Already bool `json:"already"`
}

// RequestProviderCancel sets cancel_requested on every provider batch in
// flight that holds lines of batch, and returns them, oldest first (none:
// an empty slice). It only records the request: the key's submitter sends
// the cancel to the provider and puts the lines the provider never ran back
// in the queue. Whether the batch exists is the caller's check.
//
// A submitted provider batch is made due at once: its next poll, which sends
// the cancel, may otherwise be up to the poll backoff's 10 minutes away. Only
// submitted ones: their steps (poll, cancel, collect) are guarded by their
// lines' states, so a step taken while another process still holds the row
// does nothing twice; an intent row's step creates a provider batch, and must
// never run twice at once, so it waits for its own turn (which honours the
// cancel before creating anything).
func RequestProviderCancel(ctx context.Context, db DBTX, batch string) ([]CancelRequest, error) {
	rows, err := db.Query(ctx, `WITH t AS (
			SELECT pb.id, pb.cancel_requested AS already FROM triage_provider_batch pb
			WHERE `+providerOpenSQL+`
			  AND EXISTS (SELECT 1 FROM triage_provider_batch_line l WHERE l.provider_batch = pb.id AND l.batch = $1)
			FOR UPDATE
		)
		UPDATE triage_provider_batch pb SET cancel_requested = true,
			next_poll_at = CASE WHEN pb.state = 'submitted' THEN least(pb.next_poll_at, now()) ELSE pb.next_poll_at END
		FROM t WHERE pb.id = t.id
		RETURNING pb.id, pb.provider_batch_id, pb.vendor, pb.state, t.already, pb.created_at`, batch)
	if err != nil {
		return nil, fmt.Errorf("ledger: cancel provider batches of %q: %w", batch, err)
	}
	type row struct {
		CancelRequest
		created time.Time
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var c row
		err := r.Scan(&c.ID, &c.ProviderBatchID, &c.Vendor, &c.State, &c.Already, &c.created)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: cancel provider batches of %q: %w", batch, err)
	}
	// RETURNING has no order of its own.
	slices.SortFunc(list, func(a, b row) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	out := make([]CancelRequest, len(list))
	for i, r := range list {
		out[i] = r.CancelRequest
	}
	return out, nil
}

// ModeUsage is what the calls that reached the model one way came to: an
// element of "by_mode" in `triage status --json` and `triage ledger
// --json`.
type ModeUsage struct {
	// Mode is "sync" (a call of its own) or "batch" (a line of a provider
	// batch, billed at the batch price).
	Mode     string  `json:"mode"`
	Calls    int     `json:"calls"`
	SpendUSD float64 `json:"spend_usd"`
	// SyncCostUSD, batch only, is what the same tokens would have cost as
	// sync calls, at the prices of the day they ran.
	SyncCostUSD *float64 `json:"sync_cost_usd,omitempty"`
}

// modeSumsSQL aggregates triage_attempt rows (in a SELECT over them) into
// the columns modeSums scans. The saving counts only batch attempts whose
// sync price was recorded.
const modeSumsSQL = `count(*) FILTER (WHERE mode = 'sync') AS sync_calls,
           coalesce(sum(cost_usd) FILTER (WHERE mode = 'sync'), 0)::float8 AS sync_spend,
           count(*) FILTER (WHERE mode = 'batch') AS batch_calls,
           coalesce(sum(cost_usd) FILTER (WHERE mode = 'batch'), 0)::float8 AS batch_spend,
           coalesce(sum(sync_cost_usd) FILTER (WHERE mode = 'batch'), 0)::float8 AS batch_sync_cost,
           coalesce(sum(sync_cost_usd - cost_usd) FILTER (WHERE mode = 'batch'), 0)::float8 AS batch_saved`

type modeSums struct {
	syncCalls, batchCalls                            int
	syncSpend, batchSpend, batchSyncCost, batchSaved float64
}

// usage is the by-mode split and the saving; nil, nil without batch
// attempts (a sync-only ledger shows nothing new).
func (m modeSums) usage() ([]ModeUsage, *float64) {
	if m.batchCalls == 0 {
		return nil, nil
	}
	syncCost, saved := roundUSD(m.batchSyncCost), roundUSD(m.batchSaved)
	return []ModeUsage{
		{Mode: "sync", Calls: m.syncCalls, SpendUSD: roundUSD(m.syncSpend)},
		{Mode: "batch", Calls: m.batchCalls, SpendUSD: roundUSD(m.batchSpend), SyncCostUSD: &syncCost},
	}, &saved
}

// roundUSD drops float noise from a sum of costs (1e-12 USD is far below
// any price).
func roundUSD(v float64) float64 { return math.Round(v*1e12) / 1e12 }

// UsageByMode splits the calls matching f (batch and key) into sync calls
// and provider-batch lines, and returns what the batch lines saved against
// the same tokens sync. Both are nil when no call matching f went through
// a provider batch.
func UsageByMode(ctx context.Context, db DBTX, f AttemptFilter) ([]ModeUsage, *float64, error) {
	var m modeSums
	err := db.QueryRow(ctx, `SELECT `+modeSumsSQL+`
		FROM triage_attempt WHERE ($1 = '' OR batch = $1) AND ($2 = '' OR key = $2)`, f.Batch, f.Key).
		Scan(&m.syncCalls, &m.syncSpend, &m.batchCalls, &m.batchSpend, &m.batchSyncCost, &m.batchSaved)
	if err != nil {
		return nil, nil, fmt.Errorf("ledger: usage by mode: %w", err)
	}
	byMode, saved := m.usage()
	return byMode, saved, nil
}
