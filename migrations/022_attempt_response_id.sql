-- Issue 23: the OpenAI Responses API in background mode.
--
-- A background create answers at once with the response's id; the worker
-- stores it on the attempt before it polls, so a worker that stops or dies
-- while the response runs leaves the id behind, and the next run of the
-- job polls it instead of creating (and paying for) the response again.
ALTER TABLE triage_attempt ADD COLUMN response_id text NULL;

CREATE INDEX triage_attempt_response_id ON triage_attempt (idempotency_key)
    WHERE response_id IS NOT NULL AND status IN ('intent', 'possibly_billed');
