-- Times are timestamptz (microseconds). Every table has a pk identity column
-- that orders rows by creation and backs list cursors; ids stay text.
CREATE TABLE sessions (
    pk         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id         text PRIMARY KEY,
    agent_id   text NOT NULL,
    user_id    text NOT NULL DEFAULT '',
    platform   text NOT NULL DEFAULT '',
    workspace  text NOT NULL DEFAULT '',
    channel    text NOT NULL DEFAULT '',
    thread     text NOT NULL DEFAULT '',
    title      text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id, pk);
CREATE INDEX sessions_agent ON sessions (agent_id, pk);

CREATE TABLE runs (
    pk            bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id            text PRIMARY KEY,
    session_id    text NOT NULL REFERENCES sessions (id),
    agent_id      text NOT NULL,
    user_id       text NOT NULL DEFAULT '',
    run_type      text NOT NULL,
    status        text NOT NULL CHECK (status IN ('queued', 'running', 'paused', 'completed', 'failed', 'cancelled')),
    parent_run_id text NOT NULL DEFAULT '',
    routine_id    text NOT NULL DEFAULT '',
    input         text NOT NULL DEFAULT '',
    output        text NOT NULL DEFAULT '',
    error         text NOT NULL DEFAULT '',
    input_tokens  bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    last_seq      bigint NOT NULL DEFAULT 0,
    claimed_by    text NOT NULL DEFAULT '',
    claim_until   timestamptz,
    created_at    timestamptz NOT NULL,
    started_at    timestamptz,
    finished_at   timestamptz
);
CREATE INDEX runs_session ON runs (session_id, pk);
-- The runs that are not terminal, per session: the session head is the first.
CREATE INDEX runs_active ON runs (session_id, pk) WHERE status IN ('queued', 'running', 'paused');
CREATE INDEX runs_status ON runs (status, pk);

-- The journal: append-only, (run_id, seq) unique. json (not jsonb) keeps the
-- bytes as written.
CREATE TABLE run_events (
    run_id     text NOT NULL REFERENCES runs (id),
    seq        bigint NOT NULL,
    type       text NOT NULL,
    data       json NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE approvals (
    pk           bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id           text PRIMARY KEY,
    run_id       text NOT NULL REFERENCES runs (id),
    session_id   text NOT NULL,
    tool_call_id text NOT NULL,
    tool         text NOT NULL,
    arguments    json NOT NULL,
    args_sha256  text NOT NULL,
    policy       json NOT NULL,
    requested_by text NOT NULL DEFAULT '',
    status       text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'cancelled')),
    decided_by   text NOT NULL DEFAULT '',
    decided_via  text NOT NULL DEFAULT '',
    reason       text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    decided_at   timestamptz
);
CREATE UNIQUE INDEX approvals_call ON approvals (run_id, tool_call_id);
CREATE INDEX approvals_status ON approvals (status, pk);
CREATE INDEX approvals_due ON approvals (expires_at, pk) WHERE status = 'pending';

-- The queue. A waiting job has consumer ''; a delivered one has the consumer
-- and lease token, and visible_at is when its lease runs out. A dead-lettered
-- job has dead_at set. Enqueues of one key serialize on an advisory lock, so
-- at most one of them inserts (see enqueueTx).
CREATE TABLE jobs (
    pk           bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id           text PRIMARY KEY,
    kind         text NOT NULL,
    key          text NOT NULL DEFAULT '',
    payload      bytea NOT NULL,
    attempt      integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL DEFAULT 0,
    visible_at   timestamptz NOT NULL,
    consumer     text NOT NULL DEFAULT '',
    lease        text NOT NULL DEFAULT '',
    last_error   text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    dead_at      timestamptz
);
CREATE INDEX jobs_due ON jobs (visible_at, pk) WHERE dead_at IS NULL;
CREATE INDEX jobs_key ON jobs (key) WHERE dead_at IS NULL AND consumer = '' AND key <> '';
CREATE INDEX jobs_consumer ON jobs (consumer) WHERE dead_at IS NULL AND consumer <> '';
CREATE INDEX jobs_dead ON jobs (dead_at, pk) WHERE dead_at IS NOT NULL;
