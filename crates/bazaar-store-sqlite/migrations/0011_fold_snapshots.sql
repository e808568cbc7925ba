-- Folds of the event ledger written down at a seq (`Store::save_fold_snapshot`): derived state, off the ledger.
CREATE TABLE fold_snapshots (name TEXT PRIMARY KEY, seq INTEGER NOT NULL, head TEXT NOT NULL, body BLOB NOT NULL);
