-- The meter: events delivered per member, per UTC day (days since 1970-01-01), per transport.
CREATE TABLE meter (
    member    TEXT NOT NULL,
    day       INTEGER NOT NULL,
    transport TEXT NOT NULL CHECK (transport IN ('websocket', 'sse', 'poll', 'webhook')),
    events    INTEGER NOT NULL CHECK (events >= 0),
    PRIMARY KEY (member, day, transport)
) STRICT;
