-- Issue 19: a stray provider batch is recorded and collected, not just
-- cancelled.
--
-- A process whose lease on a provider batch row ran out during its create (a
-- stall longer than the lease, a database outage) may create a second
-- provider batch of the row's lines, after another process took the row over
-- and created its own. The first process cancels it, but the provider bills
-- every line that ran before the cancel. That batch is now a row of its own:
-- stray_of names the row whose lines it holds, stray_attempts the attempts of
-- those lines (as they were when it was created), so that its collection can
-- record each line it ran as a paid duplicate of its record (an attempt with
-- reason stray_duplicate, its cost in the spend) without moving the lines,
-- which stay the original row's. A stray row holds no line of its own.
ALTER TABLE triage_provider_batch
    ADD COLUMN stray_of bigint NULL REFERENCES triage_provider_batch (id),
    ADD COLUMN stray_attempts bigint[] NULL;

-- Retention keeps a row while a stray of it is kept (the foreign key), and
-- asks this for every row it would delete.
CREATE INDEX triage_provider_batch_stray_of ON triage_provider_batch (stray_of) WHERE stray_of IS NOT NULL;
