-- Adds incarnation to github.com/idemgo/idem (sqlite dialect, with a shard column): a random nonzero number
-- that the claim which creates a record writes, and that no later phase, resume or takeover
-- of a live request changes, so that a record tells one request on its key from the next
-- (after Forget, a release, or the takeover of an expired record). Records from before keep
-- 0 and go on working. Store.Migrate makes the same change.

-- +goose Up
ALTER TABLE idempotency_keys ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN incarnation;
