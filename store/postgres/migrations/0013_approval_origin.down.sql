ALTER TABLE approvals DROP COLUMN origin;
