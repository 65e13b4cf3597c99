-- The table of github.com/idemgo/idem for the mysql dialect, as its first version made it.
-- migrations_test.go applies the files of this directory in order, and checks the
-- table they make against Store.Schema.

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

