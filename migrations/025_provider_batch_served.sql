-- Issue 19: whether a provider batch answered a line with a success, kept
-- on the row.
--
-- The safety net does not count a batch line's rejection toward the key's
-- rejection streak when its provider batch answered a line with a 2xx: the
-- account served that batch, and its lines, answered together, are applied by
-- their jobs in no order. That was read from the batch's other lines once per
-- rejected line (quadratic on a batch that fails whole). The submitter now
-- sets served at collection, before it stores any line's answer (so before
-- any job can apply one), and the rule reads it with the line: one row.
ALTER TABLE triage_provider_batch ADD COLUMN served boolean NOT NULL DEFAULT false;

-- Batches collected before this migration: served as the old rule read it
-- (a line answered with a 2xx waiting, or a line applied as its record's
-- result). A batch is read once here, not once per line.
UPDATE triage_provider_batch p SET served = true
 WHERE p.stray_of IS NULL
   AND EXISTS (SELECT 1 FROM triage_provider_batch_line l
                 LEFT JOIN triage_attempt a ON a.id = l.attempt_id
                WHERE l.provider_batch = p.id
                  AND (a.status = 'ok'
                       OR (l.state = 'answered' AND (l.observation->'observation'->>'status') LIKE '2__')));
