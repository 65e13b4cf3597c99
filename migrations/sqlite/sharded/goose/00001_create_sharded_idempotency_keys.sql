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

-- +goose Up
CREATE TABLE IF NOT EXISTS "idempotency_keys" (
	shard_key    BIGINT NOT NULL,
	key          BLOB    NOT NULL,
	request_hash BLOB    NOT NULL,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	status       INTEGER,
	header       BLOB,
	body         BLOB,
	checksum     BLOB,
	token        INTEGER NOT NULL DEFAULT 0,
	phase        TEXT,
	lease_until  INTEGER,
	resume_backoff INTEGER,
	PRIMARY KEY (shard_key, key)
);

CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at" ON "idempotency_keys" (expires_at);

-- +goose Down
DROP TABLE idempotency_keys;
