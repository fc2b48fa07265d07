-- Times are unix nanoseconds (UTC). rowid orders rows by creation and backs list cursors.
CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    agent_id   TEXT NOT NULL,
    user_id    TEXT NOT NULL DEFAULT '',
    platform   TEXT NOT NULL DEFAULT '',
    workspace  TEXT NOT NULL DEFAULT '',
    channel    TEXT NOT NULL DEFAULT '',
    thread     TEXT NOT NULL DEFAULT '',
    title      TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX sessions_user ON sessions(user_id);

CREATE TABLE runs (
    id            TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions(id),
    agent_id      TEXT NOT NULL,
    user_id       TEXT NOT NULL DEFAULT '',
    run_type      TEXT NOT NULL,
    status        TEXT NOT NULL,
    parent_run_id TEXT NOT NULL DEFAULT '',
    routine_id    TEXT NOT NULL DEFAULT '',
    input         TEXT NOT NULL DEFAULT '',
    output        TEXT NOT NULL DEFAULT '',
    error         TEXT NOT NULL DEFAULT '',
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    last_seq      INTEGER NOT NULL DEFAULT 0,
    claimed_by    TEXT NOT NULL DEFAULT '',
    claim_until   INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    started_at    INTEGER,
    finished_at   INTEGER
);
CREATE INDEX runs_session ON runs(session_id, status);
CREATE INDEX runs_status ON runs(status);

-- The journal: append-only, (run_id, seq) unique.
CREATE TABLE run_events (
    run_id     TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    type       TEXT NOT NULL,
    data       BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE approvals (
    id           TEXT PRIMARY KEY,
    run_id       TEXT NOT NULL REFERENCES runs(id),
    session_id   TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    tool         TEXT NOT NULL,
    arguments    BLOB NOT NULL,
    args_sha256  TEXT NOT NULL,
    policy       BLOB NOT NULL,
    requested_by TEXT NOT NULL DEFAULT '',
    status       TEXT NOT NULL,
    decided_by   TEXT NOT NULL DEFAULT '',
    decided_via  TEXT NOT NULL DEFAULT '',
    reason       TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    decided_at   INTEGER
);
CREATE UNIQUE INDEX approvals_call ON approvals(run_id, tool_call_id);
CREATE INDEX approvals_status ON approvals(status, expires_at);

-- The embedded queue. A waiting job has consumer ''; a delivered one has the
-- consumer and lease token, and visible_at is when its lease runs out.
-- A dead-lettered job has dead_at set.
CREATE TABLE jobs (
    id           TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    key          TEXT NOT NULL DEFAULT '',
    payload      BLOB NOT NULL,
    attempt      INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 0,
    visible_at   INTEGER NOT NULL,
    consumer     TEXT NOT NULL DEFAULT '',
    lease        TEXT NOT NULL DEFAULT '',
    last_error   TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    dead_at      INTEGER
);
CREATE INDEX jobs_due ON jobs(visible_at) WHERE dead_at IS NULL;
CREATE INDEX jobs_key ON jobs(key) WHERE dead_at IS NULL AND key <> '';
CREATE INDEX jobs_consumer ON jobs(consumer) WHERE dead_at IS NULL AND consumer <> '';
