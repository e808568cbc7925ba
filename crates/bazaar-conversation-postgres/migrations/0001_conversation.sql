-- The conversation plane's own tables, apart from the ledger's.
-- Channels, the stints members spend in them, and the one message log.

-- The sequencer: one row holding the last log position. Every write
-- transaction locks it first (SELECT ... FOR UPDATE), so conversation writes
-- run one at a time across connections and nodes, and position is gapless.
CREATE TABLE conversation_head (
    id            BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (id),
    last_position BIGINT NOT NULL CHECK (last_position >= 0)
);
INSERT INTO conversation_head (id, last_position) VALUES (TRUE, 0);

-- last_seq is the channel's own sequence row, bumped in the posting transaction.
CREATE TABLE channels (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('dm', 'public_room', 'private_room')),
    name       TEXT,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_seq   BIGINT NOT NULL DEFAULT 0 CHECK (last_seq >= 0)
);

-- One row per stint: joining opens one, leaving closes it. Delivery is fixed by
-- log positions: a stint receives messages with joined_after < position <= left_after.
CREATE TABLE memberships (
    stint        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel      TEXT NOT NULL REFERENCES channels (id),
    member       TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('owner', 'member')),
    joined_at    BIGINT NOT NULL,
    joined_after BIGINT NOT NULL CHECK (joined_after >= 0),
    left_at      BIGINT,
    left_after   BIGINT,
    muted        BOOLEAN NOT NULL DEFAULT FALSE,
    read_seq     BIGINT NOT NULL DEFAULT 0 CHECK (read_seq >= 0),
    CHECK ((left_at IS NULL) = (left_after IS NULL)),
    CHECK (left_after IS NULL OR left_after >= joined_after)
);
-- At most one open stint per member and channel.
CREATE UNIQUE INDEX memberships_current ON memberships (channel, member) WHERE left_after IS NULL;
CREATE INDEX memberships_by_member ON memberships (member, channel);

-- The log: position is server-wide and gapless (the inbox cursor), seq is
-- gapless per channel. Both are assigned in the posting transaction.
CREATE TABLE messages (
    position     BIGINT PRIMARY KEY CHECK (position >= 1),
    channel      TEXT NOT NULL REFERENCES channels (id),
    seq          BIGINT NOT NULL CHECK (seq >= 1),
    authored_by  TEXT NOT NULL,
    on_behalf_of TEXT,
    handle       TEXT,
    kind         TEXT NOT NULL,
    body         TEXT NOT NULL,
    reply_seq    BIGINT,
    reply_author TEXT,
    mentions     TEXT NOT NULL,
    at           BIGINT NOT NULL,
    UNIQUE (channel, seq),
    CHECK ((reply_seq IS NULL) = (reply_author IS NULL))
);
