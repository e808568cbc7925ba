-- The storefront: full-text search over listings and the search log.
-- Listings are documents (kind 'listing'); their `search_text` (lower-case
-- words written by the core) is indexed as a tsvector with the 'simple'
-- configuration (no stemming, no stop words), kept in step by a trigger, so
-- both adapters match the same words.
CREATE TABLE listing_search (id TEXT COLLATE "C" PRIMARY KEY, tsv tsvector NOT NULL);
CREATE INDEX listing_search_tsv ON listing_search USING GIN (tsv);
CREATE FUNCTION listing_search_sync() RETURNS trigger AS $$
BEGIN
  IF NEW.kind = 'listing' THEN
    INSERT INTO listing_search (id, tsv) VALUES (NEW.id, to_tsvector('simple', (NEW.body::jsonb) ->> 'search_text'))
    ON CONFLICT (id) DO UPDATE SET tsv = EXCLUDED.tsv;
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER docs_listing_search AFTER INSERT OR UPDATE ON docs FOR EACH ROW EXECUTE FUNCTION listing_search_sync();
-- Every search, by normalised query: how often, and how many listings it found last.
CREATE TABLE searches (query TEXT PRIMARY KEY, count BIGINT NOT NULL, hits_last BIGINT NOT NULL,
  first_at BIGINT NOT NULL, last_at BIGINT NOT NULL);
-- Unmet demand: queries that found nothing the last time, most frequent first.
CREATE INDEX searches_unmet ON searches (count DESC, query) WHERE hits_last = 0;
