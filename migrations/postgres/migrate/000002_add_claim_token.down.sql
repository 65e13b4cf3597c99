-- Adds the claim token of github.com/idemgo/idem (postgres dialect): Complete and Abandon
-- change a record only if it carries the token of the claim that wrote it. Records
-- from before keep token 0 and go on working. Store.Migrate makes the same change.

ALTER TABLE idempotency_keys DROP COLUMN token;
