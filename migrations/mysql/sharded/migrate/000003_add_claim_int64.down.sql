-- Adds to github.com/idemgo/idem (mysql dialect, with a shard column of kind int64,
-- idem.WithShardColumn(idem.ShardInt64())) the procedure through which idem.MySQL()
-- claims from shard kinds on: idempotency_keys_claim_int64, which takes the shard value as
-- a BIGINT. The table does not change. Binaries of earlier versions go on calling
-- idempotency_keys_claim2 (and idempotency_keys_claim), which stay as they were, so that
-- both run on one table during a rolling upgrade (docs/operations.md, "Upgrading the
-- table"). Run it before any binary of this version starts: their claims fail without it.
-- For a shard column of another kind, create instead the procedure that `idem schema
-- -dialect mysql -shard-column KIND` prints, idempotency_keys_claim_bytes, which takes the
-- shard value as a VARBINARY(255). Store.Migrate makes the same change. TiDB and Vitess do
-- without the procedures: run Store.Migrate there, or leave this version out.

DROP PROCEDURE IF EXISTS idempotency_keys_claim_int64;
