-- Adds incarnation to github.com/idemgo/idem (mysql dialect, with a shard column): a random nonzero number
-- that the claim which creates a record writes, and that no later phase, resume or takeover
-- of a live request changes, so that a record tells one request on its key from the next
-- (after Forget, a release, or the takeover of an expired record). Records from before keep
-- 0 and go on working. Store.Migrate makes the same change.
-- It also adds idempotency_keys_claim2, which writes the incarnation, through which
-- idem.MySQL() claimed from this version until shard kinds (version 3 adds the procedure
-- of those); binaries of earlier versions go on calling idempotency_keys_claim, which
-- stays as it was, so that both run on one table during a rolling upgrade
-- (docs/operations.md, "Upgrading the table"). Add the column before any binary of this
-- version starts. TiDB has no stored procedures: on TiDB, run
-- Store.Migrate (or idem migrate -dialect tidb) instead of these files.

ALTER TABLE idempotency_keys ADD COLUMN incarnation BIGINT NOT NULL DEFAULT 0;

CREATE PROCEDURE IF NOT EXISTS `idempotency_keys_claim2`(IN s BIGINT, IN k VARBINARY(512), IN h VARBINARY(64), IN tok BIGINT, IN inc BIGINT, IN ca BIGINT, IN ea BIGINT, IN w INT)
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
