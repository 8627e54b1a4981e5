-- Issue 21: when a key's rejection streak began.
--
-- A success answered before the streak's first rejection, whose report (its
-- completion's write) lands after it, must not end the streak: the reset
-- compares the success's answer time with this. Unix nanoseconds, not a
-- timestamptz (which keeps microseconds): the worker compares answer times
-- to the nanosecond, and a clock standing still (tests) gives a success and
-- a rejection the same instant, which must read as the same instant here.
-- NULL: no streak, or one written by a worker that did not keep it (any
-- success ends that one, as it did then).
ALTER TABLE triage_watch_run ADD COLUMN streak_since_ns bigint NULL;

-- Streak starts kept by session 9's first workers as a marker element
-- ("since <unix ns>", first in records) move to the column.
UPDATE triage_watch_run
   SET streak_since_ns = split_part(records[1], ' ', 2)::bigint,
       records = records[2:]
 WHERE records[1] LIKE 'since %' AND strpos(records[1], '/') = 0
   AND split_part(records[1], ' ', 2) ~ '^[0-9]+$';
