-- The table of github.com/idemgo/idem for the mysql dialect with a shard column
-- (idem.WithShardColumn("BIGINT")): shard_key holds the value that the effects of each
-- request are sharded by, such as a customer id, and the primary key is (shard_key, key).
-- Use these files instead of the others of migrations/mysql, for a new table: they make
-- the table of the current version at once. Write shard_key's type as the type of the
-- effects' shard column, here and in WithShardColumn. The sharded database's own step
-- (a Vitess VSchema entry, Citus's create_distributed_table) comes after: see
-- docs/scaling.md. migrations_test.go checks the table they make against Store.Schema.
-- TiDB and Vitess do without the procedure: run Store.Migrate there, or leave it out.

DROP PROCEDURE IF EXISTS idempotency_keys_claim;
DROP TABLE idempotency_keys;
