-- Provider Batch APIs (pipeline mode = "batch" | "auto"): the provider batches
-- triage submitted and the jobs in each. A row is written before every call
-- to the provider (intent) and updated after it, so a crash between the two
-- never loses a provider batch nor submits a job twice.

-- Which way an attempt reached the model: a synchronous call or a line of a
-- provider batch (billed at the batch price). `ledger` and `status` split
-- spend by it and show what batch mode saved.
ALTER TABLE triage_attempt ADD COLUMN mode text NOT NULL DEFAULT 'sync'
    CHECK (mode IN ('sync', 'batch'));
-- What the same tokens would have cost synchronously (batch attempts only),
-- so the saving is read, not recomputed from prices that may have changed.
ALTER TABLE triage_attempt ADD COLUMN sync_cost_usd numeric NULL;

-- `triage run --deadline` / a pipeline's `deadline`: when the whole batch
-- must be done. NULL: no deadline (mode "auto" then uses the Batch API).
ALTER TABLE triage_batch ADD COLUMN deadline timestamptz NULL;

CREATE TABLE triage_provider_batch (
    id                bigserial PRIMARY KEY,
    key               text NOT NULL,
    vendor            text NOT NULL,
    model             text NOT NULL,
    -- intent: lines chosen, nothing sent yet (after a crash: may exist at
    --   the provider; found by metadata or custom_id before any resubmit);
    -- uploaded: OpenAI input file created (input_file_id set);
    -- submitted: the provider batch exists (provider_batch_id set);
    -- ended: the provider says it ended (completed, expired, cancelled,
    --   failed validation); results are being collected;
    -- collected: every line has its outcome;
    -- abandoned: never reached the provider (create refused), lines reopened.
    state             text NOT NULL DEFAULT 'intent'
                      CHECK (state IN ('intent', 'uploaded', 'submitted', 'ended', 'collected', 'abandoned')),
    provider_batch_id text NULL,
    input_file_id     text NULL,
    output_file_id    text NULL,
    error_file_id     text NULL,
    -- the vendor's own status word (in_progress, finalizing, expired, ...).
    vendor_status     text NULL,
    -- the vendor's request_counts as last polled.
    counts            jsonb NOT NULL DEFAULT '{}',
    lines             integer NOT NULL DEFAULT 0,
    -- set by `triage batch cancel` or by auto mode near the deadline; the
    -- owner of the key's submitter performs the provider cancel.
    cancel_requested  boolean NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT now(),
    submitted_at      timestamptz NULL,
    expires_at        timestamptz NULL,
    ended_at          timestamptz NULL,
    collected_at      timestamptz NULL,
    next_poll_at      timestamptz NOT NULL DEFAULT now(),
    polls             integer NOT NULL DEFAULT 0,
    last_error        text NULL
);

CREATE UNIQUE INDEX triage_provider_batch_provider_id
    ON triage_provider_batch (key, provider_batch_id) WHERE provider_batch_id IS NOT NULL;
CREATE INDEX triage_provider_batch_open
    ON triage_provider_batch (key, next_poll_at) WHERE state NOT IN ('collected', 'abandoned');

CREATE TABLE triage_provider_batch_line (
    id              bigserial PRIMARY KEY,
    -- NULL while the line waits for the next provider batch.
    provider_batch  bigint NULL REFERENCES triage_provider_batch (id),
    key             text NOT NULL,
    job_id          bigint NOT NULL,
    batch           text NOT NULL,
    record_id       text NOT NULL,
    -- the job's idempotency key, sent as custom_id.
    custom_id       text NOT NULL,
    -- the ledger attempt (intent) this line's outcome finishes.
    attempt_id      bigint NULL REFERENCES triage_attempt (id),
    -- the rendered vendor request body, as the sync call would send it.
    body            jsonb NOT NULL,
    -- pending: waiting for a provider batch; submitted: in one;
    -- answered: the provider answered it (observation set), the job applies it;
    -- not_run: expired, canceled or missing from the results, to be sent again;
    -- applied: the job has acted on the outcome (final).
    state           text NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'submitted', 'answered', 'not_run', 'applied')),
    -- the line's classify.Observation as JSON (status, headers, body) once answered.
    observation     jsonb NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    answered_at     timestamptz NULL
);

-- One job is in at most one open line, so it is never in two live provider batches.
CREATE UNIQUE INDEX triage_provider_batch_line_open_job
    ON triage_provider_batch_line (job_id) WHERE state <> 'applied';
CREATE INDEX triage_provider_batch_line_batch
    ON triage_provider_batch_line (provider_batch, custom_id);
CREATE INDEX triage_provider_batch_line_pending
    ON triage_provider_batch_line (key, id) WHERE state = 'pending';
