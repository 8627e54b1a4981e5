-- The submitter wakes the jobs of answered and not-run lines every round
-- (a wake can miss a job that was running at that moment): an index on just
-- those lines, so the round does not scan every line ever applied.
CREATE INDEX triage_provider_batch_line_to_apply
    ON triage_provider_batch_line (key) WHERE state IN ('answered', 'not_run');
