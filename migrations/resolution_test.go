package migrations_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Migration 019 gives the lost answers written before it their resolution:
// found by look-up, resent (another attempt under the key after it),
// dead-lettered (the record's dead letter), else unknown; an answered
// attempt has none.
func TestAttemptResolutionBackfill(t *testing.T) {
	t.Parallel()
	got := backfilled[string, string](t, "attempt_resolution", `INSERT INTO triage_attempt
		(batch, record_id, job_id, attempt, key, model, idempotency_key, request_hash, status, reason) VALUES
		('b1', 'resent', 1, 1, 'k', 'm', 'i-resent', 'h', 'possibly_billed', NULL),
		('b1', 'resent', 1, 2, 'k', 'm', 'i-resent', 'h', 'ok', NULL),
		('b1', 'found', 2, 1, 'k', 'm', 'i-found', 'h', 'ok', 'lookup_found'),
		('b1', 'dead', 3, 1, 'k', 'm', 'i-dead', 'h', 'possibly_billed', NULL),
		('b1', 'lost', 4, 1, 'k', 'm', 'i-lost', 'h', 'possibly_billed', NULL),
		('b1', 'replayed', 5, 1, 'k', 'm', 'i-replayed', 'h', 'resolved', NULL);
	INSERT INTO triage_dead_letter (batch, record_id, job_id, pipeline, key, class, reason)
		VALUES ('b1', 'dead', 3, 'p', 'k', 'ambiguous', 'ambiguous_unresolved')`,
		`SELECT record_id || '/' || attempt, coalesce(resolution, '') FROM triage_attempt`)
	require.Equal(t, map[string]string{"resent/1": "resent", "resent/2": "", "found/1": "found", "dead/1": "dead_lettered",
		"lost/1": "unknown", "replayed/1": "resent"}, got)
}
