-- The table of github.com/idemgo/idem for the postgres dialect, as its first version made it.
-- migrations_test.go applies the files of this directory in order, and checks the
-- table they make against Store.Schema.

CREATE TABLE IF NOT EXISTS "idempotency_keys" (
	key          bytea   PRIMARY KEY,
	request_hash bytea   NOT NULL,
	created_at   bigint  NOT NULL,
	expires_at   bigint  NOT NULL,
	status       integer,
	header       bytea,
	body         bytea,
	checksum     bytea
);

CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at" ON "idempotency_keys" (expires_at);

