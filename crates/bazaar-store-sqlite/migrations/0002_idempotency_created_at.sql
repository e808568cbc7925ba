-- The sweeper prunes idempotency records by age.
CREATE INDEX idempotency_created_at ON idempotency (created_at);
