-- A record's open provider-batch line, found by its record rather than its
-- job: `triage dlq requeue` refuses a record whose line is still in a live
-- provider batch or holds a paid answer not applied yet (its new job would
-- send the record again while the provider bills the first line).
CREATE INDEX triage_provider_batch_line_open_record
    ON triage_provider_batch_line (batch, record_id) WHERE state <> 'applied';

-- A key's open lines: what a key's submitter still has to collect or wake,
-- also when no pipeline on the key is in batch mode any more (a collect-only
-- submitter asks this every round).
CREATE INDEX triage_provider_batch_line_open_key
    ON triage_provider_batch_line (key) WHERE state <> 'applied';
