-- Placeholder for the migration number another branch of issue 13 / issue 10 holds; the lead drops it at merge.
SELECT 1;
