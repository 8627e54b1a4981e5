package workertest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
)

// ProviderBatch describes a provider batch row as the batch submitter
// writes it (triage_provider_batch), with its lines: for tests of what
// status, the pages and `triage batch cancel` show and do, without a
// submitter or a provider.
type ProviderBatch struct {
	// Key, Vendor and Model default to Key, "openai" and "fake-model".
	Key, Vendor, Model string
	// State defaults to "submitted".
	State string
	// ProviderBatchID is the vendor's id; "" leaves it NULL (not submitted).
	ProviderBatchID string
	// VendorStatus; "" leaves it NULL (never polled).
	VendorStatus string
	// Counts is the vendor's request_counts as JSON; default {}.
	Counts string
	// Batch and Records: one line per record of that triage batch.
	Batch   string
	Records []string
	// Lines is the provider batch's line count; default len(Records).
	Lines int
	// SubmittedAgo sets submitted_at (and created_at) that long before now;
	// ExpiresIn sets expires_at that long after now. Zero leaves
	// submitted_at at now and expires_at NULL.
	SubmittedAgo, ExpiresIn time.Duration
}

// jobIDs gives lines distinct job ids: one job is in at most one open line.
var jobIDs atomic.Int64

// InsertProviderBatch writes the provider batch and its lines and returns
// its id.
func InsertProviderBatch(t testing.TB, db ledger.DBTX, pb ProviderBatch) int64 {
	t.Helper()
	ctx := context.Background()
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&pb.Key, Key)
	def(&pb.Vendor, "openai")
	def(&pb.Model, "fake-model")
	def(&pb.State, "submitted")
	def(&pb.Counts, "{}")
	if pb.Lines == 0 {
		pb.Lines = len(pb.Records)
	}
	var id int64
	err := db.QueryRow(ctx, `INSERT INTO triage_provider_batch
			(key, vendor, model, state, provider_batch_id, vendor_status, counts, lines, created_at, submitted_at, expires_at)
		VALUES ($1, $2, $3, $4, nullif($5, ''), nullif($6, ''), $7::jsonb, $8,
			now() - $9::bigint * interval '1 microsecond', now() - $9::bigint * interval '1 microsecond',
			CASE WHEN $10::bigint = 0 THEN NULL ELSE now() + $10::bigint * interval '1 microsecond' END)
		RETURNING id`,
		pb.Key, pb.Vendor, pb.Model, pb.State, pb.ProviderBatchID, pb.VendorStatus, pb.Counts, pb.Lines,
		pb.SubmittedAgo.Microseconds(), pb.ExpiresIn.Microseconds()).Scan(&id)
	require.NoError(t, err)
	for _, rec := range pb.Records {
		_, err := db.Exec(ctx, `INSERT INTO triage_provider_batch_line
				(provider_batch, key, job_id, batch, record_id, custom_id, body, state)
			VALUES ($1, $2, $3, $4, $5, $6, '{}', 'submitted')`,
			id, pb.Key, 1_000_000+jobIDs.Add(1), pb.Batch, rec, "triage-"+pb.Batch+"-"+rec)
		require.NoError(t, err)
	}
	return id
}

// BatchAttempt writes a finished ok attempt that was a line of a provider
// batch: billed costUSD, where the same tokens sync would have cost
// syncCostUSD.
func BatchAttempt(t testing.TB, db ledger.DBTX, batch, record string, costUSD, syncCostUSD float64) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := ledger.BeginAttempt(ctx, db, ledger.Intent{Batch: batch, RecordID: record, Attempt: 1, Key: Key,
		Model: "fake-model", IdempotencyKey: "triage-" + batch + "-" + record, RequestHash: "h"})
	require.NoError(t, err)
	require.NoError(t, ledger.FinishAttempt(ctx, db, id, ledger.Outcome{Status: ledger.AttemptOK, CostUSD: costUSD}))
	_, err = db.Exec(ctx, `UPDATE triage_attempt SET mode = 'batch', sync_cost_usd = $2 WHERE id = $1`, id, syncCostUSD)
	require.NoError(t, err)
	return id
}
