-- Adds to github.com/idemgo/idem (mysql dialect, with a shard column of kind int64,
-- idem.WithShardColumn(idem.ShardInt64())) the procedure through which idem.MySQL()
-- claims from shard kinds on: idempotency_keys_claim_int64, which takes the shard value as
-- a BIGINT. The table does not change. Binaries of earlier versions go on calling
-- idempotency_keys_claim2 (and idempotency_keys_claim), which stay as they were, so that
-- both run on one table during a rolling upgrade (docs/operations.md, "Upgrading the
-- table"). Run it before any binary of this version starts: their claims fail without it.
-- For a shard column of another kind, create instead the procedure that `idem schema
-- -dialect mysql -shard-column KIND` prints, idempotency_keys_claim_bytes, which takes the
-- shard value as a VARBINARY(255). Store.Migrate makes the same change. TiDB and Vitess do
-- without the procedures: run Store.Migrate there, or leave this version out.

-- +goose Up
-- +goose StatementBegin
CREATE PROCEDURE IF NOT EXISTS `idempotency_keys_claim_int64`(IN s BIGINT, IN k VARBINARY(512), IN h VARBINARY(64), IN tok BIGINT, IN inc BIGINT, IN ca BIGINT, IN ea BIGINT, IN w INT)
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
	INSERT INTO `idempotency_keys` (shard_key, `key`, request_hash, token, incarnation, created_at, expires_at)
	VALUES (s, k, h, tok, inc, ca, ea)
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
			DECLARE c, e, t, i BIGINT;
			SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation INTO rh, st, hd, bd, cs, c, e, t, i FROM `idempotency_keys` WHERE shard_key = s AND `key` = k FOR UPDATE;
			IF e <= ca THEN
				UPDATE `idempotency_keys` SET request_hash = h, created_at = ca, expires_at = ea,
					token = tok, incarnation = inc, status = NULL, header = NULL, body = NULL, checksum = NULL
				WHERE shard_key = s AND `key` = k;
				SET rh = h, st = NULL, hd = NULL, bd = NULL, cs = NULL, c = ca, e = ea, t = tok, i = inc;
			END IF;
			SELECT t <=> tok, FALSE, rh, st, hd, bd, cs, c, e, t, i;
		END;
	END IF;
END;
-- +goose StatementEnd

-- +goose Down
DROP PROCEDURE IF EXISTS idempotency_keys_claim_int64;
