-- A batch's settle is announced once, fleet-wide: the worker that first sees
-- a batch settled (every record completed or dead-lettered) claims it with
-- one UPDATE ... WHERE settle_notified_at IS NULL and raises the
-- batch_settled alert ([alerts] webhook_url); every other process finds it
-- claimed. A requeue that sets the batch running again clears the claim, so
-- its next settle is announced too.
ALTER TABLE triage_batch ADD COLUMN settle_notified_at timestamptz;

-- Batches settled before this migration are not announced now.
UPDATE triage_batch b SET settle_notified_at = now()
WHERE b.total <= (SELECT count(*) FROM triage_result r WHERE r.batch = b.id)
    + (SELECT count(*) FROM triage_dead_letter d WHERE d.batch = b.id AND d.requeued_at IS NULL);

-- The workers look only at the batches not yet announced.
CREATE INDEX triage_batch_settle_pending ON triage_batch (id) WHERE settle_notified_at IS NULL;
