-- Uploaded files (courier receipts' images), content-addressed: one row per
-- SHA-256 of the bytes, never changed. Builds before this kept them as 'blob'
-- documents with base64 bodies; those stay where they are and are still read.
CREATE TABLE blobs (sha256 TEXT PRIMARY KEY, content_type TEXT NOT NULL, size INTEGER NOT NULL,
  bytes BLOB NOT NULL, parties TEXT NOT NULL, created_at INTEGER NOT NULL,
  CHECK (length(sha256) = 64), CHECK (size = length(bytes)));
