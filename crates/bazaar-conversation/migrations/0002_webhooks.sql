-- Webhook endpoints and the durable outbox. A post inserts one delivery per
-- enabled endpoint of each current member in its own transaction, so a
-- message is never committed without the deliveries it owes.

CREATE TABLE webhook_endpoints (
    id              TEXT PRIMARY KEY,
    member          TEXT NOT NULL,
    url             TEXT NOT NULL,
    -- Kept readable: the registry signs with it (see the compromise ledger).
    secret          TEXT NOT NULL,
    previous_secret TEXT,
    previous_until  INTEGER,
    created_at      INTEGER NOT NULL,
    disabled_at     INTEGER,
    disabled_reason TEXT
) STRICT;
CREATE INDEX webhook_endpoints_by_member ON webhook_endpoints (member);

CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY,
    endpoint        TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    position        INTEGER NOT NULL REFERENCES messages (position),
    state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at INTEGER NOT NULL,
    leased_until    INTEGER,
    last_status     INTEGER,
    last_error      TEXT,
    updated_at      INTEGER NOT NULL,
    UNIQUE (endpoint, position)
) STRICT;
-- Each endpoint's line, in log order.
CREATE INDEX webhook_deliveries_line ON webhook_deliveries (endpoint, state, position);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
