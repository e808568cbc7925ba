-- Foundation schema: members, ledger, tokens, idempotency, event chain.
-- Immutable once landed: change the schema with a new numbered file.
-- Cursor-paged keys (holds.id, accounts.id) use COLLATE "C" so pages come in
-- byte order, the same order the SQLite adapter returns.
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE chain_head (id INTEGER PRIMARY KEY CHECK (id = 1), seq BIGINT NOT NULL, hash TEXT NOT NULL);
INSERT INTO chain_head VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
CREATE TABLE members (id TEXT PRIMARY KEY, kind TEXT NOT NULL, owner TEXT, handle TEXT NOT NULL, created_at BIGINT NOT NULL);
CREATE TABLE handles (handle TEXT PRIMARY KEY, member TEXT NOT NULL, retired BOOLEAN NOT NULL, since BIGINT NOT NULL);
CREATE TABLE credentials (hash TEXT PRIMARY KEY, member TEXT NOT NULL, created_at BIGINT NOT NULL, revoked_at BIGINT);
CREATE TABLE invites (code_hash TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at BIGINT NOT NULL, used_by TEXT, used_at BIGINT);
CREATE TABLE accounts (
  id TEXT COLLATE "C" PRIMARY KEY, allow_negative BOOLEAN NOT NULL,
  debits_posted BIGINT NOT NULL, credits_posted BIGINT NOT NULL, debits_pending BIGINT NOT NULL,
  CHECK (allow_negative OR credits_posted - debits_posted - debits_pending >= 0));
CREATE TABLE budgets (agent TEXT PRIMARY KEY, per_call_max BIGINT NOT NULL, per_day_max BIGINT NOT NULL,
  total_max BIGINT NOT NULL, spent_total BIGINT NOT NULL, day BIGINT NOT NULL, spent_day BIGINT NOT NULL);
CREATE TABLE holds (id TEXT COLLATE "C" PRIMARY KEY, account TEXT NOT NULL, amount BIGINT NOT NULL CHECK (amount > 0),
  created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, state TEXT NOT NULL,
  posted_amount BIGINT NOT NULL, resolved_at BIGINT);
CREATE INDEX holds_pending_expiry ON holds (expires_at, id) WHERE state = 'pending';
-- One row per resolved hold: a hold cannot resolve twice even if the core erred.
CREATE TABLE hold_resolutions (hold TEXT PRIMARY KEY, state TEXT NOT NULL, posted_amount BIGINT NOT NULL, at BIGINT NOT NULL);
CREATE TABLE tokens (jti TEXT PRIMARY KEY, buyer TEXT NOT NULL, merchant TEXT NOT NULL, max_amount BIGINT NOT NULL,
  order_id TEXT NOT NULL, resource TEXT NOT NULL, hold TEXT NOT NULL UNIQUE, issued_at BIGINT NOT NULL, expires_at BIGINT NOT NULL);
-- Second layer of exactly-once: a token settles once, an order is paid once.
CREATE TABLE settlements (id TEXT PRIMARY KEY, jti TEXT NOT NULL UNIQUE, buyer TEXT NOT NULL, merchant TEXT NOT NULL,
  order_id TEXT NOT NULL, amount BIGINT NOT NULL, fee BIGINT NOT NULL, net BIGINT NOT NULL, settled_at BIGINT NOT NULL,
  UNIQUE (merchant, order_id));
-- pos is commit order: batches are serialised by the lock on chain_head.
CREATE TABLE transfers (pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT NOT NULL UNIQUE, debit TEXT NOT NULL,
  credit TEXT NOT NULL, amount BIGINT NOT NULL CHECK (amount > 0), kind TEXT NOT NULL, hold TEXT, link TEXT NOT NULL,
  authored_by TEXT NOT NULL, on_behalf_of TEXT NOT NULL, at BIGINT NOT NULL);
CREATE TABLE idempotency (scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL, outcome TEXT NOT NULL,
  created_at BIGINT NOT NULL, PRIMARY KEY (scope, key));
-- body is the exact JSON text the event hash covers, so it is kept as TEXT.
CREATE TABLE events (seq BIGINT PRIMARY KEY, prev_hash TEXT NOT NULL, hash TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,
  body TEXT NOT NULL, authored_by TEXT NOT NULL, on_behalf_of TEXT NOT NULL, at BIGINT NOT NULL);
-- Transfers and events are never changed or removed (TRUNCATE included).
CREATE FUNCTION bazaar_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% are %', TG_TABLE_NAME, TG_ARGV[0] USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
CREATE TRIGGER transfers_no_update BEFORE UPDATE ON transfers FOR EACH ROW EXECUTE FUNCTION bazaar_refuse_change('immutable');
CREATE TRIGGER transfers_no_delete BEFORE DELETE ON transfers FOR EACH ROW EXECUTE FUNCTION bazaar_refuse_change('immutable');
CREATE TRIGGER transfers_no_truncate BEFORE TRUNCATE ON transfers FOR EACH STATEMENT EXECUTE FUNCTION bazaar_refuse_change('immutable');
CREATE TRIGGER events_no_update BEFORE UPDATE ON events FOR EACH ROW EXECUTE FUNCTION bazaar_refuse_change('append-only');
CREATE TRIGGER events_no_delete BEFORE DELETE ON events FOR EACH ROW EXECUTE FUNCTION bazaar_refuse_change('append-only');
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events FOR EACH STATEMENT EXECUTE FUNCTION bazaar_refuse_change('append-only');
