-- The baseline peer's schema: a plain PostgreSQL design for paid calls.
-- One transaction per token (a hold on the buyer) and one per settlement.
CREATE TABLE IF NOT EXISTS members (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('buyer', 'merchant')),
  credential_hash TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS accounts (
  id TEXT PRIMARY KEY REFERENCES members (id),
  balance BIGINT NOT NULL,
  held BIGINT NOT NULL DEFAULT 0 CHECK (held >= 0),
  CHECK (balance - held >= 0));
CREATE TABLE IF NOT EXISTS tokens (
  id TEXT PRIMARY KEY,
  buyer TEXT NOT NULL REFERENCES accounts (id),
  merchant TEXT NOT NULL REFERENCES accounts (id),
  max_amount BIGINT NOT NULL CHECK (max_amount > 0),
  order_id TEXT NOT NULL,
  resource TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'settled')),
  settled_amount BIGINT,
  issued_at_ms BIGINT NOT NULL,
  expires_at_ms BIGINT NOT NULL,
  UNIQUE (buyer, merchant, order_id));
CREATE TABLE IF NOT EXISTS idempotency (
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  status SMALLINT,
  response TEXT,
  created_at_ms BIGINT NOT NULL,
  PRIMARY KEY (scope, key));
-- A token pays once; the idempotency key is deliberately not unique here so
-- the harness's "one transfer per key" check tests the design, not a constraint.
CREATE TABLE IF NOT EXISTS transfers (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  debit TEXT NOT NULL REFERENCES accounts (id),
  credit TEXT NOT NULL REFERENCES accounts (id),
  amount BIGINT NOT NULL CHECK (amount > 0),
  token TEXT NOT NULL UNIQUE REFERENCES tokens (id),
  idem_scope TEXT NOT NULL,
  idem_key TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL);
