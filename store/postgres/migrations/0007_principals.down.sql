DROP TABLE audit;
ALTER TABLE approvals DROP COLUMN decided_by_name;
ALTER TABLE runs DROP COLUMN started_by;
