-- The table of github.com/idemgo/idem, as Store.Schema gives it for the mysql dialect.
-- migrations_test.go checks that it stays so; go test -run TestMigrationFiles -update rewrites it.

CREATE TABLE IF NOT EXISTS `idempotency_keys` (
	`key`       VARBINARY(512) NOT NULL,
	request_hash VARBINARY(64)  NOT NULL,
	token        BIGINT         NOT NULL,
	created_at   BIGINT         NOT NULL,
	expires_at   BIGINT         NOT NULL,
	status       INT            NULL,
	header       MEDIUMBLOB     NULL,
	body         LONGBLOB       NULL,
	checksum     VARBINARY(32)  NULL,
	PRIMARY KEY (`key`),
	KEY `idempotency_keys_expires_at` (expires_at)
) ENGINE=InnoDB;

