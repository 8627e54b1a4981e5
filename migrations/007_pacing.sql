-- Pacing shared by the fleet (worker/keys Pacers): one heartbeat row per key
-- and worker process. A row says the process is alive until expires_at, which
-- it pushes forward every heartbeat; a process that dies stops doing so and
-- its row stops counting by itself. Each row also carries what that process
-- learned about the key's rate, so that a process joining the fleet starts at
-- the fleet's rate and a decrease one process decided holds for all.
CREATE TABLE triage_pacer (
    key          text             NOT NULL,
    owner        text             NOT NULL,
    -- starting | headers | throttles (keys.PaceSource)
    source       text             NOT NULL,
    -- The fleet-wide requests and tokens per second this process paces
    -- the key at (NULL: not limited), and, for source headers, the share of
    -- the headers' limit in use after throttles.
    req_rate     double precision,
    tok_rate     double precision,
    factor       double precision NOT NULL DEFAULT 1,
    -- The limits per second the headers name (NULL: none).
    header_req_rate double precision,
    header_tok_rate double precision,
    -- The last rate-limit headers this process saw (NULL: none).
    limit_requests     bigint,
    remaining_requests bigint,
    limit_tokens       bigint,
    remaining_tokens   bigint,
    headers_at   timestamptz,
    throttles    bigint           NOT NULL DEFAULT 0,
    -- Requests per second the provider accepted from this process lately:
    -- the fleet's sum anchors a decrease on what the provider really let
    -- through.
    accepted_rate double precision NOT NULL DEFAULT 0,
    expires_at   timestamptz      NOT NULL,
    updated_at   timestamptz      NOT NULL,
    PRIMARY KEY (key, owner)
);

CREATE INDEX triage_pacer_key_expires ON triage_pacer (key, expires_at);
