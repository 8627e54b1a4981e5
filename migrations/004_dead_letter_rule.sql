-- The classifier rule behind each dead letter: `triage dlq show` names the
-- rule that decided (so the operator knows which rule to fix or override in
-- [[rules]]), and `triage dlq list --unknown` finds the dead letters whose
-- verdict was a default (known:false). Dead letters written before this
-- migration have no rule and count as known.
ALTER TABLE triage_dead_letter ADD COLUMN rule text NOT NULL DEFAULT '';
ALTER TABLE triage_dead_letter ADD COLUMN unknown boolean NOT NULL DEFAULT false;
