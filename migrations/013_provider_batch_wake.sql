-- Batch lines, for the submitter's rounds.

-- When the line last became pending (written, or back from a batch where it
-- did not run): the submitter sends pending lines once none has arrived for
-- a moment, so the lines a collection requeues together go out together.
ALTER TABLE triage_provider_batch_line ADD COLUMN pending_since timestamptz NOT NULL DEFAULT now();

-- The submitter wakes the jobs of answered and not-run lines every round
-- (a wake can miss a job that was running at that moment): an index on just
-- those lines, so the round does not scan every line ever applied.
CREATE INDEX triage_provider_batch_line_to_apply
    ON triage_provider_batch_line (key) WHERE state IN ('answered', 'not_run');
