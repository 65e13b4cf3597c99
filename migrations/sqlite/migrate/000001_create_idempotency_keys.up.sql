-- The table of github.com/idemgo/idem, as Store.Schema gives it for the sqlite dialect.
-- migrations_test.go checks that it stays so; go test -run TestMigrationFiles -update rewrites it.

CREATE TABLE IF NOT EXISTS "idempotency_keys" (
	key          BLOB    NOT NULL PRIMARY KEY,
	request_hash BLOB    NOT NULL,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	status       INTEGER,
	header       BLOB,
	body         BLOB,
	checksum     BLOB
);

CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at" ON "idempotency_keys" (expires_at);

