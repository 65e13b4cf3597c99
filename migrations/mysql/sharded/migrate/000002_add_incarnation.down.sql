-- Adds incarnation to github.com/idemgo/idem (mysql dialect, with a shard column): a random nonzero number
-- that the claim which creates a record writes, and that no later phase, resume or takeover
-- of a live request changes, so that a record tells one request on its key from the next
-- (after Forget, a release, or the takeover of an expired record). Records from before keep
-- 0 and go on working. Store.Migrate makes the same change.
-- It also adds idempotency_keys_claim2, which writes the incarnation, through which
-- idem.MySQL() claimed from this version until shard kinds (version 3 adds the procedure
-- of those); binaries of earlier versions go on calling idempotency_keys_claim, which
-- stays as it was, so that both run on one table during a rolling upgrade
-- (docs/operations.md, "Upgrading the table"). Add the column before any binary of this
-- version starts. TiDB has no stored procedures: on TiDB, run
-- Store.Migrate (or idem migrate -dialect tidb) instead of these files.

DROP PROCEDURE IF EXISTS idempotency_keys_claim2;
ALTER TABLE idempotency_keys DROP COLUMN incarnation;
