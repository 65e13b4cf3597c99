-- Adds the columns of multi-step requests to github.com/idemgo/idem (sqlite dialect): phase,
-- the last step such a request committed, and lease_until, until when (microseconds
-- since the Unix epoch) its current runner owns it. Both stay NULL for records that
-- Do writes. Store.Migrate makes the same change.

-- +goose Up
ALTER TABLE idempotency_keys ADD COLUMN phase TEXT;
ALTER TABLE idempotency_keys ADD COLUMN lease_until INTEGER;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN lease_until;
ALTER TABLE idempotency_keys DROP COLUMN phase;
