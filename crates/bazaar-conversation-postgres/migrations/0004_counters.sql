-- Numbers the plane keeps for its own bookkeeping, such as the ledger
-- position the registry's notifier has read up to.
CREATE TABLE plane_counters (
    name  TEXT PRIMARY KEY,
    value BIGINT NOT NULL CHECK (value >= 0)
);
