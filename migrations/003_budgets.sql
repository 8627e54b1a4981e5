-- Bounds above the single call: the per-batch budget check sums the
-- estimated cost of the batch's open (intent or possibly billed) attempts on
-- every call, so it needs an index over just those rows; the retry budget
-- counts a key's recent attempts; alerts that must fire once fleet-wide
-- claim a row here first.

CREATE INDEX triage_attempt_open ON triage_attempt (batch)
    WHERE status IN ('intent', 'possibly_billed');

CREATE TABLE triage_alert_once (
    key        text NOT NULL,
    kind       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key, kind)
);
