-- Fallback models: how many of a batch's records moved to a fallback, so a
-- batch's fallback_max_share is checked in the statement that moves a job
-- (no extra read on the per-job path).
ALTER TABLE triage_batch ADD COLUMN fallback_jobs integer NOT NULL DEFAULT 0;
