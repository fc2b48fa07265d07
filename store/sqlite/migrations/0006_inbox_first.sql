-- The inbox becomes inbox-first: a chat adapter appends every inbound
-- message (payload, received_at) before it acknowledges the delivery, and
-- an inbox processor turns waiting messages (processed_at NULL) into runs
-- in received order. CreateRun marks a message processed (run_id,
-- processed_at) in the run's transaction; a message that needs no run, or
-- cannot be processed, is marked with processed_at (and error). A claim
-- (claimed_by until claim_until, unix ns; 0 = none) keeps two processors
-- off one message; attempts counts claims. Rows of runs created before this
-- migration are processed.
CREATE TABLE inbox_v6 (
    seq          INTEGER PRIMARY KEY,
    platform     TEXT NOT NULL,
    dedupe_key   TEXT NOT NULL,
    payload      BLOB,
    received_at  INTEGER NOT NULL,
    run_id       TEXT NOT NULL DEFAULT '',
    processed_at INTEGER,
    error        TEXT NOT NULL DEFAULT '',
    claimed_by   TEXT NOT NULL DEFAULT '',
    claim_until  INTEGER NOT NULL DEFAULT 0,
    attempts     INTEGER NOT NULL DEFAULT 0,
    UNIQUE (platform, dedupe_key)
);
INSERT INTO inbox_v6 (platform, dedupe_key, received_at, run_id, processed_at)
    SELECT platform, dedupe_key, created_at, run_id, created_at FROM inbox ORDER BY rowid;
DROP TABLE inbox;
ALTER TABLE inbox_v6 RENAME TO inbox;
CREATE INDEX inbox_waiting ON inbox (platform, received_at, seq) WHERE processed_at IS NULL;
