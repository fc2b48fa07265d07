DROP TABLE outbox;
DROP TABLE inbox;
