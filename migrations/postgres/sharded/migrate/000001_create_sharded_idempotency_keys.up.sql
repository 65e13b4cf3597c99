-- The table of github.com/idemgo/idem for the postgres dialect with a shard column of kind
-- int64 (idem.WithShardColumn(idem.ShardInt64())): shard_key holds the value that the
-- effects of each request are sharded by, such as a customer id, and the primary key is
-- (shard_key, key). Use these files instead of the others of migrations/postgres, for a
-- new table. For another kind, write shard_key's type as the dialect gives that kind, as
-- `idem schema -dialect postgres -shard-column KIND` prints it: text for text(N), bytea
-- for bytes(N), uuid for uuid; Migrate refuses a column of any other type (see
-- docs/operations.md, "Moving a table to a shard column"). The sharded database's own step
-- (a Vitess VSchema entry, Citus's create_distributed_table) comes after: see
-- docs/scaling.md. migrations_test.go checks the table they make against Store.Schema.

CREATE TABLE IF NOT EXISTS "idempotency_keys" (
	shard_key    BIGINT NOT NULL,
	key          bytea   NOT NULL,
	request_hash bytea   NOT NULL,
	created_at   bigint  NOT NULL,
	expires_at   bigint  NOT NULL,
	status       integer,
	header       bytea,
	body         bytea,
	checksum     bytea,
	token        bigint  NOT NULL DEFAULT 0,
	phase        text,
	lease_until  bigint,
	resume_backoff bigint,
	PRIMARY KEY (shard_key, key)
);

CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at" ON "idempotency_keys" (expires_at);
