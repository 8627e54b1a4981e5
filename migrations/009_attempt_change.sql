-- The one change a rejected request may get before it is sent again
-- (worker/overflow.go): '' for a request sent as rendered, else
-- 'truncated' (the record's longest strings shortened to fit the model's
-- context), 'dropped_json_mode' (sent without response_format), or both
-- joined by '+'. Export, `dlq show` and `triage ledger` show it.
ALTER TABLE triage_attempt ADD COLUMN change text NOT NULL DEFAULT '';
