-- Placeholder on branch pacing only: the loader rejects gaps, and this
-- branch was given migration number 006. Drop at merge (the numbers belong
-- to other branches).
SELECT 1;
