-- inbox dedupes inbound platform messages (webhook retries, redeliveries):
-- a (platform, dedupe_key) pair starts one run, inserted with it.
CREATE TABLE inbox (
    platform   text NOT NULL,
    dedupe_key text NOT NULL,
    run_id     text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (platform, dedupe_key)
);

-- outbox records messages sent to platforms: the intent before the call,
-- the outcome and the platform's ref after it.
CREATE TABLE outbox (
    key        text PRIMARY KEY,
    state      text NOT NULL,
    ref        text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
