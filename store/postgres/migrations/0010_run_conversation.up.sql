-- Where a run was asked (its session's binding, JSON; '' for none), so chat
-- hooks route a run without reading its session.
ALTER TABLE runs ADD COLUMN conversation text NOT NULL DEFAULT '';
