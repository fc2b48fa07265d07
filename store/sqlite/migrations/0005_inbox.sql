-- inbox dedupes inbound platform messages (webhook retries, redeliveries):
-- a (platform, dedupe_key) pair starts one run, inserted with it.
CREATE TABLE inbox (
    platform   TEXT NOT NULL,
    dedupe_key TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (platform, dedupe_key)
);

-- outbox records messages sent to platforms: the intent before the call,
-- the outcome and the platform's ref after it.
CREATE TABLE outbox (
    key        TEXT PRIMARY KEY,
    state      TEXT NOT NULL,
    ref        TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
