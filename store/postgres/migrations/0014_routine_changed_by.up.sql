-- Who made a routine, or last changed it, through the API: the requester
-- of its scheduled runs, so that exclude_requester keeps whoever wrote
-- what they do from approving them; '' when the config file's definition
-- stands.
ALTER TABLE routines ADD COLUMN changed_by TEXT NOT NULL DEFAULT '';
