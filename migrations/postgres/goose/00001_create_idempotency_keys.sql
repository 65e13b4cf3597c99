-- The table of github.com/idemgo/idem, as Store.Schema gives it for the postgres dialect.
-- migrations_test.go checks that it stays so; go test -run TestMigrationFiles -update rewrites it.

-- +goose Up
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

-- +goose Down
DROP TABLE idempotency_keys;
