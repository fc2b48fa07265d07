-- Routines: definitions synced from the config file plus their scheduling
-- state. next_fire_at is NULL while disabled; firing is a compare-and-set on it.
CREATE TABLE routines (
    id                   TEXT PRIMARY KEY,
    agent_id             TEXT NOT NULL,
    schedule             TEXT NOT NULL,
    timezone             TEXT NOT NULL,
    input                TEXT NOT NULL DEFAULT '',
    deliver_to           TEXT NOT NULL DEFAULT 'none',
    enabled              INTEGER NOT NULL,
    config_enabled       INTEGER NOT NULL, -- the file's enabled value at the last sync
    missed               TEXT NOT NULL DEFAULT 'skip',
    max_failures         INTEGER NOT NULL DEFAULT 0,
    next_fire_at         INTEGER,
    last_fire_at         INTEGER,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    disabled_reason      TEXT NOT NULL DEFAULT '',
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL
);
CREATE INDEX routines_due ON routines(next_fire_at) WHERE enabled = 1;

-- A routine's history: fires with their run, manual triggers, missed due
-- times. No foreign key: history outlives a routine removed from the config.
-- outcome is the run status counted against the failure budget ('' = not yet).
CREATE TABLE routine_history (
    routine_id       TEXT NOT NULL,
    kind             TEXT NOT NULL,
    due_at           INTEGER,
    fired_at         INTEGER NOT NULL,
    run_id           TEXT NOT NULL DEFAULT '',
    outcome          TEXT NOT NULL DEFAULT '',
    disabled_routine INTEGER NOT NULL DEFAULT 0,
    delivery         TEXT NOT NULL DEFAULT '',
    note             TEXT NOT NULL DEFAULT ''
);
CREATE INDEX routine_history_routine ON routine_history(routine_id);
CREATE UNIQUE INDEX routine_history_run ON routine_history(run_id) WHERE run_id <> '';
