-- Adds the procedure through which idem.MySQL() claims a key of github.com/idemgo/idem in one
-- statement (see the MySQL dialect's documentation): it bounds its own wait for a held key
-- and puts the session's lock wait back before it returns. idem.MariaDB() does not use it.
-- TiDB has no stored procedures: on TiDB, run Store.Migrate (or idem migrate -dialect tidb)
-- instead of these files. Store.Migrate makes the same change.

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
		UPDATE `idempotency_keys` SET request_hash = h, created_at = ca, expires_at = ea,
			token = tok, status = NULL, header = NULL, body = NULL, checksum = NULL
		WHERE `key` = k AND expires_at <= ca;
		SELECT r.token <=> tok, FALSE, r.request_hash, r.status, r.header, r.body, r.checksum, r.created_at, r.expires_at, r.token FROM (SELECT 1) AS one LEFT JOIN `idempotency_keys` AS r ON r.`key` = k FOR UPDATE;
	END IF;
END;
