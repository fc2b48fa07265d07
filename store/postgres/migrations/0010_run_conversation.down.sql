ALTER TABLE runs DROP COLUMN conversation;
