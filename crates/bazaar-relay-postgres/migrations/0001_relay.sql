-- The relay's event store on PostgreSQL: the tables of the embedded SQLite
-- engine (bazaar_relay::sqlite), apart from the ledger's and the
-- conversation plane's. Ids and keys are BYTEA (compared bytewise, like
-- SQLite blobs, so "lowest id first" is the same order). Tag values and d
-- tags are BYTEA too: an event may carry a NUL in a tag value, which TEXT
-- refuses, and one such event must not fail its whole batch.

CREATE TABLE relay_events (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The last word when two nodes write one event: the loser's insert does
    -- nothing (ON CONFLICT (id) DO NOTHING) and answers Duplicate.
    id         BYTEA NOT NULL UNIQUE,
    pubkey     BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    kind       INTEGER NOT NULL,
    -- NULL for regular events, '' for replaceable ones, the d tag for addressable ones.
    d_tag      BYTEA,
    expires_at BIGINT,
    json       TEXT NOT NULL
);
CREATE INDEX relay_events_time ON relay_events (created_at DESC, id);
CREATE INDEX relay_events_author ON relay_events (pubkey, kind, created_at DESC);
CREATE INDEX relay_events_kind ON relay_events (kind, created_at DESC);
-- Not in the SQLite schema: lets a purge find expired events without a scan.
CREATE INDEX relay_events_expiry ON relay_events (expires_at) WHERE expires_at IS NOT NULL;

-- Each (single-letter name, first value) of an event once; a query with a
-- tag filter is driven from here, already in time order per value.
CREATE TABLE relay_tags (
    name       TEXT NOT NULL,
    value      BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    -- Removing an event removes its tags (SQLite's engine deletes them itself).
    event_seq  BIGINT NOT NULL REFERENCES relay_events (seq) ON DELETE CASCADE,
    PRIMARY KEY (name, value, created_at, event_seq)
);
CREATE INDEX relay_tags_event ON relay_tags (event_seq);

-- NIP-09 tombstones: (id, author) pairs deleted, refused if they come (back).
CREATE TABLE relay_deleted (
    id     BYTEA NOT NULL,
    pubkey BYTEA NOT NULL,
    PRIMARY KEY (id, pubkey)
);

-- NIP-09 `a` deletions: versions of the address created at or before `until` are refused.
CREATE TABLE relay_deleted_addresses (
    kind   INTEGER NOT NULL,
    pubkey BYTEA NOT NULL,
    d_tag  BYTEA NOT NULL,
    until  BIGINT NOT NULL,
    PRIMARY KEY (kind, pubkey, d_tag)
);

-- Job requests purged for age, and when: a late result can be told "purged".
CREATE TABLE relay_purged_jobs (
    id        BYTEA PRIMARY KEY,
    purged_at BIGINT NOT NULL
);
