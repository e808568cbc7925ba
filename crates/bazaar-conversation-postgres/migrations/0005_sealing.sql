-- Sealed channels (docs/sealing.md): a channel is sealed or plaintext from
-- birth; a sealed message keeps its envelope and never a plaintext body; any
-- message may keep its author's signature; members publish sealing keys.
ALTER TABLE channels ADD COLUMN sealed BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE messages ADD COLUMN sealed TEXT;
ALTER TABLE messages ADD COLUMN signature TEXT;
CREATE TABLE sealing_keys (
    member       TEXT PRIMARY KEY,
    public_key   TEXT NOT NULL,
    signature    TEXT NOT NULL,
    published_at BIGINT NOT NULL
);
