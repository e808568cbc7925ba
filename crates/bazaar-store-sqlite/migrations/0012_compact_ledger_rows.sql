-- Compact ledger rows (docs/design/stored-shapes.md). A paid call left ≈ 3.8 kB
-- after its idempotency window, most of it the same few strings written again
-- and again: a member's DID ≈ 20 times, hashes as hex, event bodies as JSON.
-- 1. `names`: each member DID, account id and event kind is stored once; ledger
--    rows hold its number. A name's number never changes and is never reused.
-- 2. Events keep their hash as 32 bytes and their body as the adapter packs it
--    (`bazaar_store::packed`: a format byte, then zstd against a fixed dictionary);
--    rows migrated here keep their JSON text, which reads as before. An event's
--    `prev_hash` is the hash of the event before it, so it is read from that row
--    (the genesis hash before the first) instead of being stored again. The audit
--    still recomputes every hash over the previous row's: a changed row breaks it.
-- 5. A settlement's id is `stl_` and its token's id (`Settlement::id_for`); it is
--    stored only when it is not. A token's hold is `hold_` and its id; it is
--    never stored.
-- 3. `hold_resolutions` goes: `holds_resolve_once` (0003) already refuses a
--    second resolution in the database itself.
-- 4. Tokens and holds are keyed by their id (WITHOUT ROWID): no second copy of
--    the key in an index of its own.
-- The old table names are views with the old columns, so every read and every
-- raw query an operator has keeps working; inserting into a view stores the
-- compact row (INSTEAD OF triggers). Updates go to the `*_rows` tables.

CREATE TABLE names (n INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
INSERT OR IGNORE INTO names (name)
  SELECT kind FROM events UNION SELECT authored_by FROM events UNION SELECT on_behalf_of FROM events
  UNION SELECT debit FROM transfers UNION SELECT credit FROM transfers
  UNION SELECT authored_by FROM transfers UNION SELECT on_behalf_of FROM transfers
  UNION SELECT buyer FROM tokens UNION SELECT merchant FROM tokens
  UNION SELECT buyer FROM settlements UNION SELECT merchant FROM settlements
  UNION SELECT account FROM holds;

-- Events.
DROP TRIGGER events_no_update;
DROP TRIGGER events_no_delete;
CREATE TABLE event_rows (seq INTEGER PRIMARY KEY, hash BLOB NOT NULL CHECK (length(hash) = 32),
  kind INTEGER NOT NULL, body BLOB NOT NULL, authored_by INTEGER NOT NULL, on_behalf_of INTEGER NOT NULL,
  at INTEGER NOT NULL);
INSERT INTO event_rows
  SELECT e.seq, unhex(e.hash), k.n, e.body, a.n, o.n, e.at FROM events e
  JOIN names k ON k.name = e.kind JOIN names a ON a.name = e.authored_by JOIN names o ON o.name = e.on_behalf_of
  ORDER BY e.seq;
DROP TABLE events;
CREATE VIEW events (seq, prev_hash, hash, kind, body, authored_by, on_behalf_of, at) AS
  SELECT e.seq,
    CASE WHEN e.seq = 1 THEN '0000000000000000000000000000000000000000000000000000000000000000'
      ELSE lower(hex((SELECT p.hash FROM event_rows p WHERE p.seq = e.seq - 1))) END,
    lower(hex(e.hash)), (SELECT name FROM names WHERE n = e.kind), e.body,
    (SELECT name FROM names WHERE n = e.authored_by), (SELECT name FROM names WHERE n = e.on_behalf_of), e.at
  FROM event_rows e;
CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN
  INSERT OR IGNORE INTO names (name) VALUES (NEW.kind), (NEW.authored_by), (NEW.on_behalf_of);
  INSERT INTO event_rows VALUES (NEW.seq, unhex(NEW.hash),
    (SELECT n FROM names WHERE name = NEW.kind), NEW.body, (SELECT n FROM names WHERE name = NEW.authored_by),
    (SELECT n FROM names WHERE name = NEW.on_behalf_of), NEW.at);
END;
CREATE TRIGGER events_no_update BEFORE UPDATE ON event_rows BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON event_rows BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;

-- Transfers (no AUTOINCREMENT: rows are never deleted, so the next `pos` is always the largest plus one).
DROP TRIGGER transfers_no_update;
DROP TRIGGER transfers_no_delete;
CREATE TABLE transfer_rows (pos INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, debit INTEGER NOT NULL,
  credit INTEGER NOT NULL, amount INTEGER NOT NULL CHECK (amount > 0), kind TEXT NOT NULL, hold TEXT,
  link TEXT NOT NULL, authored_by INTEGER NOT NULL, on_behalf_of INTEGER NOT NULL, at INTEGER NOT NULL);
INSERT INTO transfer_rows
  SELECT t.pos, t.id, d.n, c.n, t.amount, t.kind, t.hold, t.link, a.n, o.n, t.at FROM transfers t
  JOIN names d ON d.name = t.debit JOIN names c ON c.name = t.credit
  JOIN names a ON a.name = t.authored_by JOIN names o ON o.name = t.on_behalf_of
  ORDER BY t.pos;
DROP TABLE transfers;
CREATE VIEW transfers (pos, id, debit, credit, amount, kind, hold, link, authored_by, on_behalf_of, at) AS
  SELECT t.pos, t.id, (SELECT name FROM names WHERE n = t.debit), (SELECT name FROM names WHERE n = t.credit),
    t.amount, t.kind, t.hold, t.link, (SELECT name FROM names WHERE n = t.authored_by),
    (SELECT name FROM names WHERE n = t.on_behalf_of), t.at
  FROM transfer_rows t;
CREATE TRIGGER transfers_insert INSTEAD OF INSERT ON transfers BEGIN
  INSERT OR IGNORE INTO names (name) VALUES (NEW.debit), (NEW.credit), (NEW.authored_by), (NEW.on_behalf_of);
  INSERT INTO transfer_rows VALUES (NEW.pos, NEW.id, (SELECT n FROM names WHERE name = NEW.debit),
    (SELECT n FROM names WHERE name = NEW.credit), NEW.amount, NEW.kind, NEW.hold, NEW.link,
    (SELECT n FROM names WHERE name = NEW.authored_by), (SELECT n FROM names WHERE name = NEW.on_behalf_of), NEW.at);
END;
CREATE TRIGGER transfers_no_update BEFORE UPDATE ON transfer_rows BEGIN SELECT RAISE(ABORT, 'transfers are immutable'); END;
CREATE TRIGGER transfers_no_delete BEFORE DELETE ON transfer_rows BEGIN SELECT RAISE(ABORT, 'transfers are immutable'); END;

-- Tokens. A token's hold is always `hold_` and its id (`pay::hold_id_for`), so it is not stored: a token
-- whose hold is named otherwise is refused rather than stored wrong.
CREATE TABLE token_rows (jti TEXT PRIMARY KEY, buyer INTEGER NOT NULL, merchant INTEGER NOT NULL,
  max_amount INTEGER NOT NULL, order_id TEXT NOT NULL, resource TEXT NOT NULL,
  issued_at INTEGER NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO token_rows
  SELECT CASE WHEN t.hold = 'hold_' || t.jti THEN t.jti END, b.n, m.n, t.max_amount, t.order_id, t.resource,
    t.issued_at, t.expires_at FROM tokens t
  JOIN names b ON b.name = t.buyer JOIN names m ON m.name = t.merchant;
DROP TABLE tokens;
CREATE VIEW tokens (jti, buyer, merchant, max_amount, order_id, resource, hold, issued_at, expires_at) AS
  SELECT t.jti, (SELECT name FROM names WHERE n = t.buyer), (SELECT name FROM names WHERE n = t.merchant),
    t.max_amount, t.order_id, t.resource, 'hold_' || t.jti, t.issued_at, t.expires_at
  FROM token_rows t;
CREATE TRIGGER tokens_insert INSTEAD OF INSERT ON tokens BEGIN
  SELECT RAISE(ABORT, 'a token''s hold is hold_ and its id') WHERE NEW.hold IS NOT 'hold_' || NEW.jti;
  INSERT OR IGNORE INTO names (name) VALUES (NEW.buyer), (NEW.merchant);
  INSERT INTO token_rows VALUES (NEW.jti, (SELECT n FROM names WHERE name = NEW.buyer),
    (SELECT n FROM names WHERE name = NEW.merchant), NEW.max_amount, NEW.order_id, NEW.resource,
    NEW.issued_at, NEW.expires_at);
END;

-- Settlements (a settlement is found by its merchant and order: that pair is the join, so it uses the index).
CREATE TABLE settlement_rows (jti TEXT PRIMARY KEY, id TEXT, buyer INTEGER NOT NULL,
  merchant INTEGER NOT NULL, order_id TEXT NOT NULL, amount INTEGER NOT NULL, fee INTEGER NOT NULL,
  net INTEGER NOT NULL, settled_at INTEGER NOT NULL, UNIQUE (merchant, order_id)) WITHOUT ROWID;
CREATE UNIQUE INDEX settlement_rows_id ON settlement_rows (id) WHERE id IS NOT NULL;
INSERT INTO settlement_rows
  SELECT s.jti, NULLIF(s.id, 'stl_' || s.jti), b.n, m.n, s.order_id, s.amount, s.fee, s.net, s.settled_at FROM settlements s
  JOIN names b ON b.name = s.buyer JOIN names m ON m.name = s.merchant;
DROP TABLE settlements;
CREATE VIEW settlements (id, jti, buyer, merchant, order_id, amount, fee, net, settled_at) AS
  SELECT COALESCE(s.id, 'stl_' || s.jti), s.jti, (SELECT name FROM names WHERE n = s.buyer), m.name, s.order_id, s.amount, s.fee, s.net,
    s.settled_at
  FROM settlement_rows s JOIN names m ON m.n = s.merchant;
CREATE TRIGGER settlements_insert INSTEAD OF INSERT ON settlements BEGIN
  INSERT OR IGNORE INTO names (name) VALUES (NEW.buyer), (NEW.merchant);
  INSERT INTO settlement_rows VALUES (NEW.jti, NULLIF(NEW.id, 'stl_' || NEW.jti), (SELECT n FROM names WHERE name = NEW.buyer),
    (SELECT n FROM names WHERE name = NEW.merchant), NEW.order_id, NEW.amount, NEW.fee, NEW.net, NEW.settled_at);
END;

-- Holds: resolved in place, once (the trigger moves with the rows).
DROP TRIGGER holds_resolve_once;
DROP INDEX holds_pending_expiry;
CREATE TABLE hold_rows (id TEXT PRIMARY KEY, account INTEGER NOT NULL, amount INTEGER NOT NULL CHECK (amount > 0),
  created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, state TEXT NOT NULL,
  posted_amount INTEGER NOT NULL, resolved_at INTEGER) WITHOUT ROWID;
INSERT INTO hold_rows
  SELECT h.id, a.n, h.amount, h.created_at, h.expires_at, h.state, h.posted_amount, h.resolved_at FROM holds h
  JOIN names a ON a.name = h.account;
DROP TABLE holds;
DROP TABLE hold_resolutions;
CREATE INDEX holds_pending_expiry ON hold_rows (expires_at) WHERE state = 'pending';
CREATE VIEW holds (id, account, amount, created_at, expires_at, state, posted_amount, resolved_at) AS
  SELECT h.id, (SELECT name FROM names WHERE n = h.account), h.amount, h.created_at, h.expires_at, h.state,
    h.posted_amount, h.resolved_at
  FROM hold_rows h;
CREATE TRIGGER holds_insert INSTEAD OF INSERT ON holds BEGIN
  INSERT OR IGNORE INTO names (name) VALUES (NEW.account);
  INSERT INTO hold_rows VALUES (NEW.id, (SELECT n FROM names WHERE name = NEW.account), NEW.amount,
    NEW.created_at, NEW.expires_at, NEW.state, NEW.posted_amount, NEW.resolved_at);
END;
CREATE TRIGGER holds_resolve_once BEFORE UPDATE ON hold_rows WHEN OLD.state <> 'pending'
BEGIN SELECT RAISE(ABORT, 'hold already resolved'); END;
