-- triage's persisted state. Placeholder filled by the ledger work.
SELECT 1;
