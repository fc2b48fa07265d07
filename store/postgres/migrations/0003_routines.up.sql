-- Routines: definitions synced from the config file plus their scheduling
-- state. next_fire_at is NULL while disabled; firing is a compare-and-set on
-- it. Ids sort bytewise (COLLATE "C"), as in store/sqlite, whatever the
-- database's collation: ListRoutines pages in id order.
CREATE TABLE routines (
    id                   text COLLATE "C" PRIMARY KEY,
    agent_id             text NOT NULL,
    schedule             text NOT NULL,
    timezone             text NOT NULL,
    input                text NOT NULL DEFAULT '',
    deliver_to           text NOT NULL DEFAULT 'none',
    enabled              boolean NOT NULL,
    config_enabled       boolean NOT NULL, -- the file's enabled value at the last sync
    missed               text NOT NULL DEFAULT 'skip',
    max_failures         integer NOT NULL DEFAULT 0,
    next_fire_at         timestamptz,
    last_fire_at         timestamptz,
    consecutive_failures integer NOT NULL DEFAULT 0,
    disabled_reason      text NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL
);
CREATE INDEX routines_due ON routines (next_fire_at, id) WHERE enabled;

-- A routine's history: fires with their run, manual triggers, missed due
-- times, in pk order. No foreign key: history outlives a routine removed
-- from the config. outcome is the run status counted against the failure
-- budget ('' = not yet).
CREATE TABLE routine_history (
    pk               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    routine_id       text NOT NULL,
    kind             text NOT NULL,
    due_at           timestamptz,
    fired_at         timestamptz NOT NULL,
    run_id           text NOT NULL DEFAULT '',
    outcome          text NOT NULL DEFAULT '',
    disabled_routine boolean NOT NULL DEFAULT false,
    delivery         text NOT NULL DEFAULT '',
    note             text NOT NULL DEFAULT ''
);
CREATE INDEX routine_history_routine ON routine_history (routine_id, pk);
CREATE UNIQUE INDEX routine_history_run ON routine_history (run_id) WHERE run_id <> '';
