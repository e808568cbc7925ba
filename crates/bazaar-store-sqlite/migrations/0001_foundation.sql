-- Foundation schema: members, ledger, tokens, idempotency, event chain.
-- Immutable once landed: change the schema with a new numbered file.
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE chain_head (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, hash TEXT NOT NULL);
INSERT INTO chain_head VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
CREATE TABLE members (id TEXT PRIMARY KEY, kind TEXT NOT NULL, owner TEXT, handle TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE handles (handle TEXT PRIMARY KEY, member TEXT NOT NULL, retired INTEGER NOT NULL, since INTEGER NOT NULL);
CREATE TABLE credentials (hash TEXT PRIMARY KEY, member TEXT NOT NULL, created_at INTEGER NOT NULL, revoked_at INTEGER);
CREATE TABLE invites (code_hash TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at INTEGER NOT NULL, used_by TEXT, used_at INTEGER);
CREATE TABLE accounts (
  id TEXT PRIMARY KEY, allow_negative INTEGER NOT NULL,
  debits_posted INTEGER NOT NULL, credits_posted INTEGER NOT NULL, debits_pending INTEGER NOT NULL,
  CHECK (allow_negative = 1 OR credits_posted - debits_posted - debits_pending >= 0));
CREATE TABLE budgets (agent TEXT PRIMARY KEY, per_call_max INTEGER NOT NULL, per_day_max INTEGER NOT NULL,
  total_max INTEGER NOT NULL, spent_total INTEGER NOT NULL, day INTEGER NOT NULL, spent_day INTEGER NOT NULL);
CREATE TABLE holds (id TEXT PRIMARY KEY, account TEXT NOT NULL, amount INTEGER NOT NULL CHECK (amount > 0),
  created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, state TEXT NOT NULL,
  posted_amount INTEGER NOT NULL, resolved_at INTEGER);
CREATE INDEX holds_pending_expiry ON holds (expires_at) WHERE state = 'pending';
-- One row per resolved hold: a hold cannot resolve twice even if the core erred.
CREATE TABLE hold_resolutions (hold TEXT PRIMARY KEY, state TEXT NOT NULL, posted_amount INTEGER NOT NULL, at INTEGER NOT NULL);
CREATE TABLE tokens (jti TEXT PRIMARY KEY, buyer TEXT NOT NULL, merchant TEXT NOT NULL, max_amount INTEGER NOT NULL,
  order_id TEXT NOT NULL, resource TEXT NOT NULL, hold TEXT NOT NULL UNIQUE, issued_at INTEGER NOT NULL, expires_at INTEGER NOT NULL);
-- Second layer of exactly-once: a token settles once, an order is paid once.
CREATE TABLE settlements (id TEXT PRIMARY KEY, jti TEXT NOT NULL UNIQUE, buyer TEXT NOT NULL, merchant TEXT NOT NULL,
  order_id TEXT NOT NULL, amount INTEGER NOT NULL, fee INTEGER NOT NULL, net INTEGER NOT NULL, settled_at INTEGER NOT NULL,
  UNIQUE (merchant, order_id));
CREATE TABLE transfers (pos INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, debit TEXT NOT NULL, credit TEXT NOT NULL,
  amount INTEGER NOT NULL CHECK (amount > 0), kind TEXT NOT NULL, hold TEXT, link TEXT NOT NULL,
  authored_by TEXT NOT NULL, on_behalf_of TEXT NOT NULL, at INTEGER NOT NULL);
CREATE TABLE idempotency (scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL, outcome TEXT NOT NULL,
  created_at INTEGER NOT NULL, PRIMARY KEY (scope, key));
CREATE TABLE events (seq INTEGER PRIMARY KEY, prev_hash TEXT NOT NULL, hash TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,
  body TEXT NOT NULL, authored_by TEXT NOT NULL, on_behalf_of TEXT NOT NULL, at INTEGER NOT NULL);
CREATE TRIGGER transfers_no_update BEFORE UPDATE ON transfers BEGIN SELECT RAISE(ABORT, 'transfers are immutable'); END;
CREATE TRIGGER transfers_no_delete BEFORE DELETE ON transfers BEGIN SELECT RAISE(ABORT, 'transfers are immutable'); END;
CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
