-- An idempotency record names the type of the receipt it holds (`pay.Settled`),
-- so a replay reads it back as that type and answers the same bytes. A column
-- of its own: `outcome` keeps exactly the text it always had (`{"Ok": …}` or
-- `{"Err": …}`), which earlier migrations read. Empty for refusals and for
-- records written before this migration (those replay their JSON as stored).
ALTER TABLE idempotency ADD COLUMN receipt_tag TEXT NOT NULL DEFAULT '';
