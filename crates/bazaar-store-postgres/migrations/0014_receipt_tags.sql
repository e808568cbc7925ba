-- As SQLite's 0013: an idempotency record names the type of the receipt it
-- holds (`pay.Settled`), in a column of its own so `outcome` keeps exactly the
-- text it always had. A node of the previous release writes no tag (the
-- default) and reads `outcome` as before, so nodes of both releases serve
-- together during a rolling upgrade.
ALTER TABLE idempotency ADD COLUMN receipt_tag TEXT NOT NULL DEFAULT '';
