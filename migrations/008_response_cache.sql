-- The response cache: the first usable answer to a request, keyed by the
-- hash of its vendor and everything it sends (model, system, prompt,
-- parameters), never by batch or record, so an identical request in any
-- batch is answered from here without a call. Rows live until expires_at
-- (the pipeline's cache_ttl after the answer was paid for); every worker
-- process sweeps expired rows (ledger.SweepResponseCache, one at a time).
CREATE TABLE triage_response_cache (
    cache_key  text        PRIMARY KEY,
    output     jsonb       NOT NULL,
    -- the paid attempt whose answer this is (no foreign key: a cache row
    -- must never block anything that tidies attempts).
    attempt_id bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

CREATE INDEX triage_response_cache_expires_at ON triage_response_cache (expires_at);
