-- Bodies: the lease saying which of a member's processes answers its
-- addressed events, and the answer chosen for each event (written once).
CREATE TABLE body_leases (
    member     TEXT PRIMARY KEY,
    body       TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;
CREATE TABLE answers (
    member   TEXT NOT NULL,
    position INTEGER NOT NULL,
    body     TEXT NOT NULL,
    at       INTEGER NOT NULL,
    PRIMARY KEY (member, position)
) STRICT;
