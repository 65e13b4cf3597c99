-- The table of github.com/idemgo/idem for the mysql dialect with a shard column of kind
-- int64 (idem.WithShardColumn(idem.ShardInt64())): shard_key holds the value that the
-- effects of each request are sharded by, such as a customer id, and the primary key is
-- (shard_key, key). Use these files instead of the others of migrations/mysql, for a new
-- table. For another kind, write shard_key's type as the dialect gives that kind, as
-- `idem schema -dialect mysql -shard-column KIND` prints it: VARBINARY(N) for text(N) and
-- bytes(N), BINARY(36) for uuid; and in version 3 the procedure that it prints,
-- idempotency_keys_claim_bytes. The procedure of this version serves binaries of versions
-- before shard kinds only. The sharded database's own step (a Vitess VSchema entry,
-- Citus's create_distributed_table) comes after: see docs/scaling.md. migrations_test.go
-- checks the table they make against Store.Schema. TiDB and Vitess do without the
-- procedures: run Store.Migrate there, or leave them out.

-- +goose Up
CREATE TABLE IF NOT EXISTS `idempotency_keys` (
	shard_key    BIGINT NOT NULL,
	`key`       VARBINARY(512) NOT NULL,
	request_hash VARBINARY(64)  NOT NULL,
	token        BIGINT         NOT NULL,
	created_at   BIGINT         NOT NULL,
	expires_at   BIGINT         NOT NULL,
	status       INT            NULL,
	header       MEDIUMBLOB     NULL,
	body         LONGBLOB       NULL,
	checksum     VARBINARY(32)  NULL,
	phase        VARBINARY(64)  NULL,
	lease_until  BIGINT         NULL,
	resume_backoff BIGINT       NULL,
	PRIMARY KEY (shard_key, `key`),
	KEY `idempotency_keys_expires_at` (expires_at)
) ENGINE=InnoDB;

-- +goose StatementBegin
CREATE PROCEDURE IF NOT EXISTS `idempotency_keys_claim`(IN s BIGINT, IN k VARBINARY(512), IN h VARBINARY(64), IN tok BIGINT, IN ca BIGINT, IN ea BIGINT, IN w INT)
SQL SECURITY INVOKER
MODIFIES SQL DATA
BEGIN
	DECLARE saved BIGINT DEFAULT @@SESSION.innodb_lock_wait_timeout;
	DECLARE lid BIGINT UNSIGNED DEFAULT LAST_INSERT_ID();
	DECLARE EXIT HANDLER FOR SQLEXCEPTION
	BEGIN
		SET SESSION innodb_lock_wait_timeout = saved;
		DO LAST_INSERT_ID(lid);
		RESIGNAL;
	END;
	IF w <> saved THEN
		SET SESSION innodb_lock_wait_timeout = w;
	END IF;
	INSERT INTO `idempotency_keys` (shard_key, `key`, request_hash, token, created_at, expires_at)
	VALUES (s, k, h, tok, ca, ea)
	ON DUPLICATE KEY UPDATE token = IF(LAST_INSERT_ID(~lid) = ~lid, token, NULL);
	IF w <> saved THEN
		SET SESSION innodb_lock_wait_timeout = saved;
	END IF;
	IF LAST_INSERT_ID() <> lid THEN
		DO LAST_INSERT_ID(lid);
		BEGIN
			DECLARE rh VARBINARY(64);
			DECLARE st INT;
			DECLARE hd MEDIUMBLOB;
			DECLARE bd LONGBLOB;
			DECLARE cs VARBINARY(32);
			DECLARE c, e, t BIGINT;
			SELECT request_hash, status, header, body, checksum, created_at, expires_at, token INTO rh, st, hd, bd, cs, c, e, t FROM `idempotency_keys` WHERE shard_key = s AND `key` = k FOR UPDATE;
			IF e <= ca THEN
				UPDATE `idempotency_keys` SET request_hash = h, created_at = ca, expires_at = ea,
					token = tok, status = NULL, header = NULL, body = NULL, checksum = NULL
				WHERE shard_key = s AND `key` = k;
				SET rh = h, st = NULL, hd = NULL, bd = NULL, cs = NULL, c = ca, e = ea, t = tok;
			END IF;
			SELECT t <=> tok, FALSE, rh, st, hd, bd, cs, c, e, t;
		END;
	END IF;
END;
-- +goose StatementEnd

-- +goose Down
DROP PROCEDURE IF EXISTS idempotency_keys_claim;
DROP TABLE idempotency_keys;
