-- The storefront: full-text search over listings and the search log.
-- Listings are documents (kind 'listing'); their `search_text` (lower-case
-- words written by the core) is indexed by FTS5, kept in step by triggers and
-- keyed by the document's rowid. Words are matched as written (no diacritic
-- folding) so both adapters match the same words.
CREATE VIRTUAL TABLE listing_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 0');
CREATE TRIGGER listing_fts_insert AFTER INSERT ON docs WHEN NEW.kind = 'listing' BEGIN
  INSERT INTO listing_fts (rowid, text) VALUES (NEW.rowid, json_extract(NEW.body, '$.search_text'));
END;
CREATE TRIGGER listing_fts_update AFTER UPDATE ON docs WHEN NEW.kind = 'listing' BEGIN
  DELETE FROM listing_fts WHERE rowid = OLD.rowid;
  INSERT INTO listing_fts (rowid, text) VALUES (NEW.rowid, json_extract(NEW.body, '$.search_text'));
END;
-- Every search, by normalised query: how often, and how many listings it found last.
CREATE TABLE searches (query TEXT PRIMARY KEY, count INTEGER NOT NULL, hits_last INTEGER NOT NULL,
  first_at INTEGER NOT NULL, last_at INTEGER NOT NULL);
-- Unmet demand: queries that found nothing the last time, most frequent first.
CREATE INDEX searches_unmet ON searches (count DESC, query) WHERE hits_last = 0;
