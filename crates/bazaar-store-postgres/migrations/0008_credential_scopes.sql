-- A credential's scopes (canonical, comma-joined); NULL is every scope, as every credential before scopes.
ALTER TABLE credentials ADD COLUMN scopes TEXT;
