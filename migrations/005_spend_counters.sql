-- Spend counters that do not serialize completions. FinishAttempt used to add
-- each attempt's cost to its batch's row inside the completion transaction,
-- so every completion of a batch waited for the one before it to commit. It
-- now appends the cost here, an insert that waits for nothing; every worker
-- process folds these rows into triage_batch.spent_usd and triage_key_spend
-- every few seconds (ledger.FoldSpend, one process at a time). Spend is the
-- folded counter plus the rows still here, so readers never see a gap.
CREATE TABLE triage_spend_delta (
    batch    text    NOT NULL,
    key      text    NOT NULL,
    cost_usd numeric NOT NULL
);
CREATE INDEX triage_spend_delta_batch ON triage_spend_delta (batch) INCLUDE (cost_usd);
CREATE INDEX triage_spend_delta_key ON triage_spend_delta (key) INCLUDE (cost_usd);

-- A key's billed spend over its whole history: the prepaid alerts read one
-- row instead of summing every attempt the key ever made.
CREATE TABLE triage_key_spend (
    key       text    PRIMARY KEY,
    spent_usd numeric NOT NULL DEFAULT 0
);
INSERT INTO triage_key_spend (key, spent_usd)
SELECT key, sum(cost_usd) FROM triage_attempt GROUP BY key HAVING sum(cost_usd) <> 0;
