-- Bodies: the lease saying which of a member's processes answers its
-- addressed events, and the answer chosen for each event (written once).
CREATE TABLE body_leases (
    member     TEXT PRIMARY KEY,
    body       TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE TABLE answers (
    member   TEXT NOT NULL,
    position BIGINT NOT NULL,
    body     TEXT NOT NULL,
    at       BIGINT NOT NULL,
    PRIMARY KEY (member, position)
);
