-- Per-key state shared by every triage process: the breaker, pauses and alerts.
-- Owned by worker/keys. Times are written with the store's clock, which is the
-- database clock (now()) in production and a pinned time in tests.

-- One row per key that has ever left the closed state. A missing row means
-- closed, generation 0.
CREATE TABLE triage_key_state (
    key              text        PRIMARY KEY,
    state            text        NOT NULL DEFAULT 'closed'
                                 CHECK (state IN ('closed', 'open', 'half_open')),
    -- Bumped on every transition except claiming a probe; results carrying an
    -- older generation are discarded (gobreaker's rule).
    generation       bigint      NOT NULL DEFAULT 0,
    opened_at        timestamptz,
    -- When the next probe may go (state open).
    probe_at         timestamptz,
    -- The live probe claim (state half_open): an opaque token, the job the
    -- probe belongs to (0 when unknown) and the lease after which a crashed
    -- prober's claim may be taken by someone else.
    probe_owner      text,
    probe_job_id     bigint,
    probe_lease_until timestamptz,
    reason           text        NOT NULL DEFAULT '',
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- At most one pause per key; Pause only ever moves "until" later.
CREATE TABLE triage_pause (
    key        text        PRIMARY KEY,
    reason     text        NOT NULL,
    until      timestamptz NOT NULL,
    set_by     text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- One row per alert raised, for `triage keys`, tests and post-mortems.
CREATE TABLE triage_alert (
    id         bigserial   PRIMARY KEY,
    kind       text        NOT NULL,
    key        text        NOT NULL DEFAULT '',
    batch      text        NOT NULL DEFAULT '',
    message    text        NOT NULL DEFAULT '',
    fields     jsonb       NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX triage_alert_key_created_at ON triage_alert (key, created_at);
