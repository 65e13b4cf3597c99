-- The table of github.com/idemgo/idem for the mysql dialect with a shard column of kind
-- int64 (idem.WithShardColumn(idem.ShardInt64())): shard_key holds the value that the
-- effects of each request are sharded by, such as a customer id, and the primary key is
-- (shard_key, key). Use these files instead of the others of migrations/mysql, for a new
-- table. For another kind, write shard_key's type as the dialect gives that kind, as
-- `idem schema -dialect mysql -shard-column KIND` prints it: VARBINARY(N) for text(N) and
-- bytes(N), BINARY(36) for uuid; and in version 3 the procedure that it prints,
-- idempotency_keys_claim_bytes. The procedure of this version serves binaries of versions
-- before shard kinds only. The sharded database's own step (a Vitess VSchema entry,
-- Citus's create_distributed_table) comes after: see docs/scaling.md. migrations_test.go
-- checks the table they make against Store.Schema. TiDB and Vitess do without the
-- procedures: run Store.Migrate there, or leave them out.

DROP PROCEDURE IF EXISTS idempotency_keys_claim;
DROP TABLE idempotency_keys;
