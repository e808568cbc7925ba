-- A settle sent without an Idempotency-Key is now recorded under `token:<jti>`
-- (it was `order:<order_id>`). Each stored settlement under an `order:` key is
-- copied under its token's key, so a retry after the upgrade replays the
-- original receipt instead of being told `token_settled`. The `order:` rows
-- stay (an explicit key spelled that way still replays) and age out with the
-- rest; refusals are not copied, so a refused token no longer blocks another
-- token for the same order.
INSERT INTO idempotency (scope, key, fingerprint, outcome, created_at)
  SELECT scope, 'token:' || (outcome::jsonb -> 'Ok' ->> 'jti'), fingerprint, outcome, created_at
  FROM idempotency
  WHERE scope LIKE '%:settle' AND key LIKE 'order:%'
    AND jsonb_typeof(outcome::jsonb -> 'Ok' -> 'jti') = 'string'
  ON CONFLICT (scope, key) DO NOTHING;
