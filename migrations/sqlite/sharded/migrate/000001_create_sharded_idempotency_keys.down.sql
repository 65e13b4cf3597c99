-- The table of github.com/idemgo/idem for the sqlite dialect with a shard column of kind
-- int64 (idem.WithShardColumn(idem.ShardInt64())): shard_key holds the value that the
-- effects of each request are sharded by, such as a customer id, and the primary key is
-- (shard_key, key). Use these files instead of the others of migrations/sqlite, for a new
-- table. shard_key's BIGINT has the INTEGER affinity of the INTEGER that Store.Migrate
-- declares, and SQLite stores and compares by affinity, as Migrate checks the column. For
-- another kind, write the type the dialect gives that kind, as `idem schema -dialect
-- sqlite -shard-column KIND` prints it: TEXT for text(N) and uuid, BLOB for bytes(N).
-- The sharded database's own step (a Vitess VSchema entry, Citus's
-- create_distributed_table) comes after: see docs/scaling.md. migrations_test.go checks
-- the table they make against Store.Schema.

DROP TABLE idempotency_keys;
