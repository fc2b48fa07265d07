-- Principals: who started a run (started_by, from the credential: key:<name>,
-- slack:<team>/<user>, …) and how an approval's decider is shown
-- (decided_by_name).
ALTER TABLE runs ADD COLUMN started_by text NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN decided_by_name text NOT NULL DEFAULT '';

-- The audit log: one row per decision, refusal, cancel, routine change or
-- trigger and refused key. Append-only: nothing updates or deletes rows.
-- id orders entries and backs the list cursor (lists run newest first), so
-- every filter index ends in id.
CREATE TABLE audit (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        timestamptz NOT NULL,
    principal text NOT NULL DEFAULT '',
    route     text NOT NULL DEFAULT '',
    action    text NOT NULL DEFAULT '',
    target    text NOT NULL DEFAULT '',
    outcome   text NOT NULL DEFAULT '',
    detail    text NOT NULL DEFAULT ''
);
CREATE INDEX audit_principal ON audit (principal, id);
CREATE INDEX audit_target ON audit (target, id);
CREATE INDEX audit_action ON audit (action, id);
CREATE INDEX audit_at ON audit (at);
