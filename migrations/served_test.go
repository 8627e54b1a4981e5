package migrations_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Migration 025 marks served the provider batches collected before it as
// the rule read them then: a line answered with a 2xx still waiting, or a
// line applied as its record's result (its attempt ok). A batch whose
// lines all failed, and a stray, stay unserved.
func TestProviderBatchServedBackfill(t *testing.T) {
	t.Parallel()
	got := backfilled[int64, bool](t, "provider_batch_served", `INSERT INTO triage_provider_batch (id, key, vendor, model, state) VALUES
		(1, 'k', 'anthropic', 'm', 'collected'), (2, 'k', 'anthropic', 'm', 'collected'),
		(3, 'k', 'anthropic', 'm', 'collected'), (4, 'k', 'anthropic', 'm', 'submitted');
	UPDATE triage_provider_batch SET stray_of = 1 WHERE id = 4;
	INSERT INTO triage_attempt (id, batch, record_id, job_id, attempt, key, model, idempotency_key, request_hash, status) VALUES
		(1, 'b1', 'ok', 1, 1, 'k', 'm', 'i-ok', 'h', 'ok'),
		(2, 'b1', 'bad', 2, 1, 'k', 'm', 'i-bad', 'h', 'failed'),
		(3, 'b1', 'bad2', 3, 1, 'k', 'm', 'i-bad2', 'h', 'failed');
	INSERT INTO triage_provider_batch_line (provider_batch, key, job_id, batch, record_id, custom_id, attempt_id, body, state, observation) VALUES
		(1, 'k', 1, 'b1', 'ok', 'i-ok', 1, 'null', 'applied', NULL),
		(1, 'k', 2, 'b1', 'bad', 'i-bad', 2, 'null', 'applied', NULL),
		(2, 'k', 3, 'b1', 'bad2', 'i-bad2', 3, 'null', 'applied', NULL),
		(2, 'k', 4, 'b1', 'rej', 'i-rej', NULL, '{}', 'answered', '{"observation":{"status":400}}'),
		(3, 'k', 5, 'b1', 'wait', 'i-wait', NULL, '{}', 'answered', '{"observation":{"status":200}}')`,
		`SELECT id, served FROM triage_provider_batch`)
	require.Equal(t, map[int64]bool{1: true, 2: false, 3: true, 4: false}, got)
}
