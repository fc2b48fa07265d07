-- Principals: who started a run (started_by, from the credential: key:<name>,
-- slack:<team>/<user>, …) and how an approval's decider is shown
-- (decided_by_name).
ALTER TABLE runs ADD COLUMN started_by TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN decided_by_name TEXT NOT NULL DEFAULT '';

-- The audit log: one row per decision, refusal, cancel, routine change or
-- trigger and refused key. Append-only: nothing updates or deletes rows.
-- id (the rowid) orders entries and backs the list cursor (lists run newest
-- first); at is unix nanoseconds (UTC). The filter indexes end in the rowid
-- implicitly, so "WHERE principal = ? ORDER BY id DESC" walks one index.
CREATE TABLE audit (
    id        INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,
    principal TEXT NOT NULL DEFAULT '',
    route     TEXT NOT NULL DEFAULT '',
    action    TEXT NOT NULL DEFAULT '',
    target    TEXT NOT NULL DEFAULT '',
    outcome   TEXT NOT NULL DEFAULT '',
    detail    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_principal ON audit(principal);
CREATE INDEX audit_target ON audit(target);
CREATE INDEX audit_action ON audit(action);
CREATE INDEX audit_at ON audit(at);
