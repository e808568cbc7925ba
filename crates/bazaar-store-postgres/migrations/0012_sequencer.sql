-- One sequencer per registry (docs/design/sequencer.md): the node holding the
-- lease below runs the only writer that may commit. Every takeover raises the
-- epoch and writes it into chain_head in the same transaction; every batch
-- compares chain_head.epoch with its own under the row lock it holds to COMMIT.
ALTER TABLE chain_head ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
CREATE TABLE ledger_sequencer (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  -- Names this registry's forwarding subject on a shared NATS server.
  cluster TEXT NOT NULL,
  holder TEXT,
  epoch BIGINT NOT NULL CHECK (epoch >= 0),
  expires_at TIMESTAMPTZ NOT NULL
);
INSERT INTO ledger_sequencer VALUES (1, md5(random()::text || clock_timestamp()::text), NULL, 0, '-infinity');
