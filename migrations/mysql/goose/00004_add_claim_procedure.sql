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
	DECLARE n INT;
	DECLARE held BIGINT;
	DECLARE EXIT HANDLER FOR SQLEXCEPTION
	BEGIN
		SET SESSION innodb_lock_wait_timeout = saved;
		RESIGNAL;
	END;
	IF w <> saved THEN
		SET SESSION innodb_lock_wait_timeout = w;
	END IF;
	INSERT INTO `idempotency_keys` (`key`, request_hash, token, created_at, expires_at)
	VALUES (k, h, tok, ca, ea)
	ON DUPLICATE KEY UPDATE
		request_hash = IF(expires_at <= ca, h, request_hash),
		status       = IF(expires_at <= ca, NULL, status),
		header       = IF(expires_at <= ca, NULL, header),
		body         = IF(expires_at <= ca, NULL, body),
		checksum     = IF(expires_at <= ca, NULL, checksum),
		token        = IF(expires_at <= ca, tok, token),
		created_at   = IF(expires_at <= ca, ca, created_at),
		expires_at   = IF(expires_at <= ca, ea, expires_at);
	SET n = ROW_COUNT();
	IF w <> saved THEN
		SET SESSION innodb_lock_wait_timeout = saved;
	END IF;
	IF n = 1 THEN
		SELECT token INTO held FROM `idempotency_keys` WHERE `key` = k FOR UPDATE;
	END IF;
	IF NOT (n = 2 OR (n = 1 AND held <=> tok)) THEN
		SELECT FALSE, FALSE, r.request_hash, r.status, r.header, r.body, r.checksum, r.created_at, r.expires_at, r.token FROM (SELECT 1) AS one LEFT JOIN `idempotency_keys` AS r ON r.`key` = k FOR UPDATE;
	END IF;
END;
-- +goose StatementEnd

-- +goose Down
DROP PROCEDURE IF EXISTS idempotency_keys_claim;
