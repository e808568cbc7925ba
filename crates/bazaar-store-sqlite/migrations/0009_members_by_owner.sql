-- An owner's agents, for its own pages (`Store::agents_of`).
CREATE INDEX IF NOT EXISTS members_owner ON members (owner);
