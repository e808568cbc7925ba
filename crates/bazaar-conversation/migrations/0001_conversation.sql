-- The conversation plane's own database, separate from the ledger's.
-- Channels, the stints members spend in them, and the one message log.

CREATE TABLE channels (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('dm', 'public_room', 'private_room')),
    name       TEXT,
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

-- One row per stint: joining opens one, leaving closes it. Delivery is fixed by
-- log positions: a stint receives messages with joined_after < position <= left_after.
CREATE TABLE memberships (
    stint        INTEGER PRIMARY KEY,
    channel      TEXT NOT NULL REFERENCES channels (id),
    member       TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('owner', 'member')),
    joined_at    INTEGER NOT NULL,
    joined_after INTEGER NOT NULL,
    left_at      INTEGER,
    left_after   INTEGER,
    muted        INTEGER NOT NULL DEFAULT 0 CHECK (muted IN (0, 1)),
    read_seq     INTEGER NOT NULL DEFAULT 0 CHECK (read_seq >= 0),
    CHECK ((left_at IS NULL) = (left_after IS NULL)),
    CHECK (left_after IS NULL OR left_after >= joined_after)
) STRICT;
-- At most one open stint per member and channel.
CREATE UNIQUE INDEX memberships_current ON memberships (channel, member) WHERE left_after IS NULL;
CREATE INDEX memberships_by_member ON memberships (member, channel);

-- The log: position is server-wide and gapless (the inbox cursor), seq is
-- gapless per channel. Both are assigned in the posting transaction.
CREATE TABLE messages (
    position     INTEGER PRIMARY KEY CHECK (position >= 1),
    channel      TEXT NOT NULL REFERENCES channels (id),
    seq          INTEGER NOT NULL CHECK (seq >= 1),
    authored_by  TEXT NOT NULL,
    on_behalf_of TEXT,
    handle       TEXT,
    kind         TEXT NOT NULL,
    body         TEXT NOT NULL,
    reply_seq    INTEGER,
    reply_author TEXT,
    mentions     TEXT NOT NULL,
    at           INTEGER NOT NULL,
    UNIQUE (channel, seq),
    CHECK ((reply_seq IS NULL) = (reply_author IS NULL))
) STRICT;
