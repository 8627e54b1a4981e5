-- Batch controls by hand (`triage batch pause | resume | cancel`): two more
-- stored states. paused: the batch's jobs stay queued and make no call until
-- it is resumed. cancelled: its records not yet completed are dead-lettered
-- (reason cancelled) as their jobs come off the queue; calls in flight
-- finish and are recorded. Both are read by the worker before every call
-- and by the intent's reservation (ledger.ReserveAttempt).
ALTER TABLE triage_batch DROP CONSTRAINT triage_batch_state_check;
ALTER TABLE triage_batch ADD CONSTRAINT triage_batch_state_check
    CHECK (state IN ('running', 'paused_exhausted', 'paused_budget', 'paused', 'cancelled'));
