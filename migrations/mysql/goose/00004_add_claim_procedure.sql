-- Adds the procedure through which idem.MySQL() claims a key of github.com/idemgo/idem in one
-- statement (see the MySQL dialect's documentation): it bounds its own wait for a held key
-- and puts the session's lock wait back before it returns. idem.MariaDB() does not use it.
-- TiDB has no stored procedures: on TiDB, run Store.Migrate (or idem migrate -dialect tidb)
-- instead of these files. Store.Migrate makes the same change.

-- +goose Up
-- +goose StatementBegin
CREATE PROCEDURE idempotency_keys_claim(IN k VARBINARY(512), IN h VARBINARY(64), IN tok BIGINT, IN ca BIGINT, IN ea BIGINT, IN w INT)
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
	INSERT INTO `idempotency_keys` (`key`, request_hash, token, created_at, expires_at)
	VALUES (k, h, tok, ca, ea)
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
			SELECT request_hash, status, header, body, checksum, created_at, expires_at, token INTO rh, st, hd, bd, cs, c, e, t FROM `idempotency_keys` WHERE `key` = k FOR UPDATE;
			IF e <= ca THEN
				UPDATE `idempotency_keys` SET request_hash = h, created_at = ca, expires_at = ea,
					token = tok, status = NULL, header = NULL, body = NULL, checksum = NULL
				WHERE `key` = k;
				SET rh = h, st = NULL, hd = NULL, bd = NULL, cs = NULL, c = ca, e = ea, t = tok;
			END IF;
			SELECT t <=> tok, FALSE, rh, st, hd, bd, cs, c, e, t;
		END;
	END IF;
END;
-- +goose StatementEnd

-- +goose Down
DROP PROCEDURE IF EXISTS idempotency_keys_claim;
