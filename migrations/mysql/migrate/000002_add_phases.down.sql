-- Adds the columns of multi-step requests to github.com/idemgo/idem (mysql dialect): phase,
-- the last step such a request committed, and lease_until, until when (microseconds
-- since the Unix epoch) its current runner owns it. Both stay NULL for records that
-- Do writes. Store.Migrate makes the same change.

ALTER TABLE idempotency_keys DROP COLUMN lease_until, DROP COLUMN phase;
