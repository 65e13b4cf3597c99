-- The table of github.com/idemgo/idem for the sqlite dialect, as its first version made it.
-- migrations_test.go applies the files of this directory in order, and checks the
-- table they make against Store.Schema.

-- +goose Up
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

-- +goose Down
DROP TABLE idempotency_keys;
