DROP TABLE jobs;
DROP TABLE approvals;
DROP TABLE run_events;
DROP TABLE runs;
DROP TABLE sessions;
