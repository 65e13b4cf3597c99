-- Adds resume_backoff to github.com/idemgo/idem (postgres dialect): for a multi-step request
-- that a Resumer failed to finish, how long (microseconds) after its lease ran out the
-- Resumer leaves it alone, doubled at each failure. NULL until then, and in the records
-- that Do writes. Store.Migrate makes the same change.

-- +goose Up
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS resume_backoff bigint;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN resume_backoff;
