-- The table of github.com/idemgo/idem for the sqlite dialect with a shard column
-- (idem.WithShardColumn("BIGINT")): shard_key holds the value that the effects of each
-- request are sharded by, such as a customer id, and the primary key is (shard_key, key).
-- Use these files instead of the others of migrations/sqlite, for a new table: they make
-- the table of the current version at once. Write shard_key's type as the type of the
-- effects' shard column, here and in WithShardColumn. The sharded database's own step
-- (a Vitess VSchema entry, Citus's create_distributed_table) comes after: see
-- docs/scaling.md. migrations_test.go checks the table they make against Store.Schema.

DROP TABLE idempotency_keys;
