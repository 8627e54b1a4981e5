-- The storm breaker: a second breaker per key, tripped by a run or a high
-- share of transient failures and healed by probes with a growing cooldown.
-- Same shape as triage_key_state (the exhausted breaker), so the probe
-- protocol of worker/keys serves both; cooldown_ms is the wait before the
-- next probe, doubled by every failed probe up to the key's storm_probe_max.
-- Owned by worker/keys.
ALTER TABLE triage_key_state ADD COLUMN cooldown_ms bigint NOT NULL DEFAULT 0;

CREATE TABLE triage_storm_state (
    key              text        PRIMARY KEY,
    state            text        NOT NULL DEFAULT 'closed'
                                 CHECK (state IN ('closed', 'open', 'half_open')),
    generation       bigint      NOT NULL DEFAULT 0,
    opened_at        timestamptz,
    probe_at         timestamptz,
    probe_owner      text,
    probe_job_id     bigint,
    probe_lease_until timestamptz,
    reason           text        NOT NULL DEFAULT '',
    updated_at       timestamptz NOT NULL DEFAULT now(),
    cooldown_ms      bigint      NOT NULL DEFAULT 0
);
