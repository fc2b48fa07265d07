-- Where an approval's tool comes from ("mcp:<server>", or "agent" for the
-- agent's own), so that cards, the API and MCP show whom a decision lets
-- act; '' on approvals from before it was kept.
ALTER TABLE approvals ADD COLUMN origin TEXT NOT NULL DEFAULT '';
