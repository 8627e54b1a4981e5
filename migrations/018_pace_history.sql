-- The key's pace over time, so that a past night's picture shows the pace
-- it ran at: triage_pacer holds only the live processes' heartbeats. A
-- worker records one row per key per step (10 s) while it paces the key;
-- the first process to reach a step writes it (ON CONFLICT DO NOTHING).
-- The retention service prunes rows older than [retention] age.
CREATE TABLE triage_pace_history (
    key         text             NOT NULL,
    at          timestamptz      NOT NULL,
    source      text             NOT NULL,
    rate_per_s  double precision NOT NULL,
    limit_per_s double precision,
    PRIMARY KEY (key, at)
);

CREATE INDEX triage_pace_history_at ON triage_pace_history (at);
