-- State-machine documents (contracts, disputes, stake records). The core owns
-- the JSON `body`; the adapter keeps it as text beside two indexable columns:
-- `due_at`, when the sweeper must next look at it, and the parties who may
-- list it. `parties` is the document's party list exactly as written (a JSON
-- array, so it reads back in its order); `doc_parties` indexes it, one row per
-- distinct party. Ids are paged by cursor, so they use COLLATE "C" (byte
-- order, as in the SQLite adapter).
CREATE TABLE docs (kind TEXT NOT NULL, id TEXT COLLATE "C" NOT NULL, body TEXT NOT NULL, due_at BIGINT,
  parties TEXT NOT NULL, PRIMARY KEY (kind, id));
-- The sweeper's work list: documents with a deadline, earliest first.
CREATE INDEX docs_due ON docs (due_at, kind, id) WHERE due_at IS NOT NULL;
CREATE TABLE doc_parties (kind TEXT NOT NULL, party TEXT NOT NULL, id TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (kind, party, id));
