-- Adds resume_backoff to github.com/idemgo/idem (mysql dialect): for a multi-step request
-- that a Resumer failed to finish, how long (microseconds) after its lease ran out the
-- Resumer leaves it alone, doubled at each failure. NULL until then, and in the records
-- that Do writes. Store.Migrate makes the same change.

ALTER TABLE idempotency_keys ADD COLUMN resume_backoff BIGINT NULL;
