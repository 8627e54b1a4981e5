-- Issue 21, third round.
--
-- A dead letter is suspect when the class that dead-lettered it came from
-- the classifier's weakest evidence (the signal layer or the status alone,
-- or a default no rule knew) or from the safety net: the record may be fine
-- and the key the problem. suspect names why ('' when it is not); `triage
-- dlq list`, the dead-letter page and --json show it, and `triage dlq
-- requeue --suspect` takes back just those.
ALTER TABLE triage_dead_letter ADD COLUMN suspect text NOT NULL DEFAULT '';

CREATE INDEX triage_dead_letter_suspect ON triage_dead_letter (id)
    WHERE suspect <> '' AND requeued_at IS NULL;

-- The safety net's runs, one row per key, shared by every process: a
-- rejection streak (one failure fingerprint, the different records it
-- rejected in a row) and a run of throttles, counted fleet-wide so that
-- two processes each seeing half a storm still hold the key. A success
-- anywhere ends both runs (the row is reset, not deleted).
CREATE TABLE triage_watch_run (
    key            text PRIMARY KEY,
    fingerprint    text NOT NULL DEFAULT '',
    records        text[] NOT NULL DEFAULT '{}',
    throttle_since timestamptz,
    throttles      integer NOT NULL DEFAULT 0,
    throttle_fp    text NOT NULL DEFAULT '',
    updated_at     timestamptz NOT NULL DEFAULT now()
);
