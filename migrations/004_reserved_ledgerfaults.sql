-- Placeholder on branch ledgerfaults only: the loader rejects gaps, and this
-- branch was given migration number 005. Drop at merge (004 belongs to
-- another branch).
SELECT 1;
