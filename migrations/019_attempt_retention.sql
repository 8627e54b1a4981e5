-- Retention of finished attempts (ledger.Prune). The lines' attempt_id gets
-- an index, so that deleting an attempt (its foreign-key check) and the
-- prune's "no line refers to it" test read an index, not the line table.
-- The attempts a prune may remove (failed calls that billed nothing) are
-- indexed by when they finished, so a pass walks only old candidates.
CREATE INDEX triage_provider_batch_line_attempt ON triage_provider_batch_line (attempt_id);
CREATE INDEX triage_attempt_failed_unbilled ON triage_attempt (finished_at, id)
    WHERE status = 'failed' AND cost_usd = 0 AND input_tokens = 0 AND output_tokens = 0;
