-- Reactions, edits and deletions point at the message they change (ref_seq,
-- indexed per channel); a post may carry its author's idempotency key,
-- unique per author, so a retried post finds the first.
ALTER TABLE messages ADD COLUMN ref_seq BIGINT;
ALTER TABLE messages ADD COLUMN idem_key TEXT;
CREATE INDEX messages_changes ON messages (channel, ref_seq) WHERE ref_seq IS NOT NULL;
CREATE UNIQUE INDEX messages_idem ON messages (authored_by, idem_key) WHERE idem_key IS NOT NULL;
