-- Folds of the event ledger written down at a seq (`Store::save_fold_snapshot`): derived state, off the ledger.
CREATE TABLE IF NOT EXISTS fold_snapshots (name TEXT PRIMARY KEY, seq BIGINT NOT NULL, head TEXT NOT NULL, body BYTEA NOT NULL);
