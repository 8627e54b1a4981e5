-- How a call whose answer was lost came out, per attempt (issue 23):
--   unknown        possibly billed, not resolved (yet): no look-up found it,
--                  it was not sent again, its record not dead-lettered
--   found          found in the provider's store by a look-up (ambiguous =
--                  "lookup"): settled as billed once (status ok, reason
--                  lookup_found)
--   resent         sent again under the same idempotency key (ambiguous =
--                  "retry"): possibly billed twice unless the provider
--                  replayed it (status resolved)
--   dead_lettered  its record was dead-lettered without sending it again
--                  (ambiguous = "dead_letter", or its retries used up)
-- NULL on every attempt whose answer arrived. An intent left by a run that
-- died counts as lost once a later run resolves it.
ALTER TABLE triage_attempt ADD COLUMN resolution text
    CHECK (resolution IN ('unknown', 'found', 'resent', 'dead_lettered'));

-- Lost answers of before this migration: found by a look-up, or resent
-- (another attempt under the key after it), or dead-lettered, else unknown.
UPDATE triage_attempt a SET resolution = CASE
    WHEN a.status = 'ok' THEN 'found'
    WHEN a.status = 'resolved' OR EXISTS (SELECT 1 FROM triage_attempt b
        WHERE b.idempotency_key = a.idempotency_key AND b.id > a.id) THEN 'resent'
    WHEN EXISTS (SELECT 1 FROM triage_dead_letter d
        WHERE d.batch = a.batch AND d.record_id = a.record_id AND d.requeued_at IS NULL) THEN 'dead_lettered'
    ELSE 'unknown' END
WHERE a.mode <> 'batch' AND (a.status IN ('possibly_billed', 'resolved')
    OR (a.status = 'ok' AND a.reason = 'lookup_found'));
