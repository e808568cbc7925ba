-- People in the browser: passkeys, the state of a ceremony in progress, and
-- sessions (only the SHA-256 of a session cookie is kept).
CREATE TABLE passkeys (
    credential_id TEXT PRIMARY KEY,
    member        TEXT NOT NULL,
    user_handle   TEXT NOT NULL,
    passkey       TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT
);
CREATE INDEX passkeys_by_member ON passkeys (member);
CREATE TABLE ceremonies (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('register', 'sign_in')),
    member     TEXT,
    state      TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE TABLE sessions (
    hash       TEXT PRIMARY KEY,
    member     TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    revoked_at BIGINT
);
