-- The tag a provider batch carries at the provider (OpenAI metadata
-- triage_provider_batch), by which a row left in intent after a crash is
-- found again. The bare row id was not enough: two databases on one provider
-- account (staging and production, a database rebuilt) number their rows
-- alike, and a look-up could take another installation's batch for its own
-- and send its lines again. A random tag per row cannot collide. Rows from
-- before this migration keep their old tag, the row id, so batches already
-- created under it are still found.
ALTER TABLE triage_provider_batch ADD COLUMN tag text;
UPDATE triage_provider_batch SET tag = id::text;
ALTER TABLE triage_provider_batch
    ALTER COLUMN tag SET DEFAULT 'tpb_' || replace(gen_random_uuid()::text, '-', ''),
    ALTER COLUMN tag SET NOT NULL;
