-- triage's ledger: batches, their input records, every attempt (intent before
-- the request is sent, outcome after), results and dead letters. Unqualified
-- names: they land in the migration's search_path schema.

CREATE TABLE triage_batch (
    id         text PRIMARY KEY,
    pipeline   text NOT NULL,
    key        text NOT NULL,
    total      integer NOT NULL CHECK (total >= 0),
    budget_usd numeric NULL CHECK (budget_usd IS NULL OR budget_usd >= 0),
    -- billed cost of the batch's attempts, maintained by FinishAttempt so the
    -- per-call budget check reads one row.
    spent_usd  numeric NOT NULL DEFAULT 0,
    state      text NOT NULL DEFAULT 'running'
               CHECK (state IN ('running', 'paused_exhausted', 'paused_budget')),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX triage_batch_created_at ON triage_batch (created_at);

CREATE TABLE triage_record (
    batch     text NOT NULL REFERENCES triage_batch (id) ON DELETE CASCADE,
    record_id text NOT NULL,
    line      integer NOT NULL,
    data      jsonb NOT NULL,
    PRIMARY KEY (batch, record_id)
);

CREATE INDEX triage_record_line ON triage_record (batch, line);

CREATE TABLE triage_attempt (
    id              bigserial PRIMARY KEY,
    batch           text NOT NULL,
    record_id       text NOT NULL,
    job_id          bigint NOT NULL,
    attempt         integer NOT NULL,
    key             text NOT NULL,
    model           text NOT NULL,
    idempotency_key text NOT NULL,
    request_hash    text NOT NULL,
    status          text NOT NULL DEFAULT 'intent'
                    CHECK (status IN ('intent', 'ok', 'failed', 'possibly_billed', 'resolved')),
    class           text NULL,
    http_status     integer NULL,
    vendor_code     text NULL,
    reason          text NULL,
    input_tokens    integer NOT NULL DEFAULT 0,
    output_tokens   integer NOT NULL DEFAULT 0,
    cost_usd        numeric NOT NULL DEFAULT 0,
    -- estimated cost, set at intent time: what an ambiguous attempt may have cost.
    est_cost_usd    numeric NOT NULL DEFAULT 0,
    is_retry        boolean NOT NULL DEFAULT false,
    started_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz NULL
);

CREATE INDEX triage_attempt_idempotency_key ON triage_attempt (idempotency_key);
CREATE INDEX triage_attempt_key_started_at ON triage_attempt (key, started_at)
    INCLUDE (cost_usd, est_cost_usd, status, is_retry);
CREATE INDEX triage_attempt_batch ON triage_attempt (batch)
    INCLUDE (cost_usd, est_cost_usd, status);

CREATE TABLE triage_result (
    batch        text NOT NULL,
    record_id    text NOT NULL,
    output       jsonb NOT NULL,
    attempt_id   bigint NOT NULL REFERENCES triage_attempt (id),
    completed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (batch, record_id),
    FOREIGN KEY (batch, record_id) REFERENCES triage_record (batch, record_id) ON DELETE CASCADE
);

CREATE INDEX triage_result_attempt_id ON triage_result (attempt_id);

CREATE TABLE triage_dead_letter (
    id            bigserial PRIMARY KEY,
    batch         text NOT NULL,
    record_id     text NOT NULL,
    job_id        bigint NOT NULL,
    pipeline      text NOT NULL,
    key           text NOT NULL,
    class         text NOT NULL,
    reason        text NOT NULL,
    http_status   integer NULL,
    vendor_code   text NULL,
    attempts      integer NOT NULL DEFAULT 0,
    request       jsonb NULL,
    error_excerpt text NOT NULL DEFAULT '',
    requeued_at   timestamptz NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- a record is dead-lettered at most once at a time.
CREATE UNIQUE INDEX triage_dead_letter_live ON triage_dead_letter (batch, record_id)
    WHERE requeued_at IS NULL;
CREATE INDEX triage_dead_letter_class ON triage_dead_letter (batch, class, reason);
