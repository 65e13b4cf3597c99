-- The mysql dialect on table app.idem_keys, lock timeout 2.5s. Written by
-- go test ./dialect -run TestStatementsGolden -update

-- Capabilities: {OneWriter:false ConflictAtCommit:false MinLockWait:1s ShardedByKey:false MaxPurgeBatch:0 ReadsUncommitted:true KeepsIsolation:false}

-- Schema[0]
CREATE TABLE IF NOT EXISTS `app`.`idem_keys` (
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
	incarnation  BIGINT         NOT NULL DEFAULT 0,
	PRIMARY KEY (`key`),
	KEY `idem_keys_expires_at` (expires_at)
) ENGINE=InnoDB

-- Schema[1]
CREATE PROCEDURE IF NOT EXISTS `app`.`idem_keys_claim`(IN k VARBINARY(512), IN h VARBINARY(64), IN tok BIGINT, IN ca BIGINT, IN ea BIGINT, IN w INT)
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
	INSERT INTO `app`.`idem_keys` (`key`, request_hash, token, created_at, expires_at)
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
			SELECT request_hash, status, header, body, checksum, created_at, expires_at, token INTO rh, st, hd, bd, cs, c, e, t FROM `app`.`idem_keys` WHERE `key` = k FOR UPDATE;
			IF e <= ca THEN
				UPDATE `app`.`idem_keys` SET request_hash = h, created_at = ca, expires_at = ea,
					token = tok, status = NULL, header = NULL, body = NULL, checksum = NULL
				WHERE `key` = k;
				SET rh = h, st = NULL, hd = NULL, bd = NULL, cs = NULL, c = ca, e = ea, t = tok;
			END IF;
			SELECT t <=> tok, FALSE, rh, st, hd, bd, cs, c, e, t;
		END;
	END IF;
END

-- Schema[2]
CREATE PROCEDURE IF NOT EXISTS `app`.`idem_keys_claim2`(IN k VARBINARY(512), IN h VARBINARY(64), IN tok BIGINT, IN inc BIGINT, IN ca BIGINT, IN ea BIGINT, IN w INT)
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
	INSERT INTO `app`.`idem_keys` (`key`, request_hash, token, incarnation, created_at, expires_at)
	VALUES (k, h, tok, inc, ca, ea)
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
			SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation INTO rh, st, hd, bd, cs, c, e, t, i FROM `app`.`idem_keys` WHERE `key` = k FOR UPDATE;
			IF e <= ca THEN
				UPDATE `app`.`idem_keys` SET request_hash = h, created_at = ca, expires_at = ea,
					token = tok, incarnation = inc, status = NULL, header = NULL, body = NULL, checksum = NULL
				WHERE `key` = k;
				SET rh = h, st = NULL, hd = NULL, bd = NULL, cs = NULL, c = ca, e = ea, t = tok, i = inc;
			END IF;
			SELECT t <=> tok, FALSE, rh, st, hd, bd, cs, c, e, t, i;
		END;
	END IF;
END

-- Upgrades[0].Check
SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'idem_keys' AND COLUMN_NAME = 'phase'

-- Upgrades[0].Apply
ALTER TABLE `app`.`idem_keys` ADD COLUMN phase VARBINARY(64) NULL

-- Upgrades[1].Check
SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'idem_keys' AND COLUMN_NAME = 'lease_until'

-- Upgrades[1].Apply
ALTER TABLE `app`.`idem_keys` ADD COLUMN lease_until BIGINT NULL

-- Upgrades[2].Check
SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'idem_keys' AND COLUMN_NAME = 'resume_backoff'

-- Upgrades[2].Apply
ALTER TABLE `app`.`idem_keys` ADD COLUMN resume_backoff BIGINT NULL

-- Upgrades[3].Check
SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'idem_keys' AND COLUMN_NAME = 'incarnation'

-- Upgrades[3].Apply
ALTER TABLE `app`.`idem_keys` ADD COLUMN incarnation BIGINT NOT NULL DEFAULT 0

-- Statements.Claim
CALL `app`.`idem_keys_claim2`({key}, {request_hash}, {token}, {incarnation}, {created_at}, {expires_at}, 3)

-- Statements.ClaimedWithoutRow: true

-- Statements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE `key` = {key}

-- Statements.Complete
UPDATE `app`.`idem_keys` SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE `key` = {key} AND token = {token}

-- Statements.Abandon
DELETE FROM `app`.`idem_keys` WHERE `key` = {key} AND token = {token}

-- Statements.PurgeSelect
SELECT `key` FROM `app`.`idem_keys` WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit} FOR UPDATE SKIP LOCKED

-- Statements.PurgeDelete
DELETE p FROM `app`.`idem_keys` AS p FORCE INDEX (PRIMARY) WHERE p.`key` IN ({keys}) AND p.expires_at <= {now}

-- Statements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM `app`.`idem_keys`

-- Statements.CountExpired
SELECT COUNT(*) FROM `app`.`idem_keys` WHERE expires_at <= {now}

-- Statements.Run.Start
UPDATE `app`.`idem_keys` SET phase = {phase}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE `key` = {key} AND token = {token} AND status IS NULL

-- Statements.Run.Progress
SELECT phase, lease_until, token, created_at, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys` WHERE `key` = {key} AND status IS NULL AND phase IS NOT NULL FOR UPDATE NOWAIT

-- Statements.Run.Takeover
UPDATE `app`.`idem_keys` SET token = {token}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE `key` = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})

-- Statements.Run.Advance
UPDATE `app`.`idem_keys` SET token = {token}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE `key` = {key} AND token = {prev_token} AND status IS NULL

-- Statements.Run.Mark
UPDATE `app`.`idem_keys` SET phase = {phase}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE `key` = {key} AND token = {token} AND status IS NULL

-- Statements.Run.Renew
UPDATE `app`.`idem_keys` SET lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE `key` = {key} AND token = {token} AND status IS NULL

-- Statements.Run.Finish
UPDATE `app`.`idem_keys` SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE `key` = {key} AND token = {token} AND status IS NULL

-- Statements.Run.Release
UPDATE `app`.`idem_keys` SET lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) WHERE `key` = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- Statements.Run.Unfinished
SELECT `key`, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys`
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- Statements.Run.Resumable
SELECT `key`, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys`
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- Statements.Run.Backoff
UPDATE `app`.`idem_keys` SET resume_backoff = LEAST({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = GREATEST(lease_until, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})) WHERE `key` = {key} AND status IS NULL AND phase IS NOT NULL

-- ===== a shard column of kind int64

-- ShardColumnSchema[0]
CREATE TABLE IF NOT EXISTS `app`.`idem_keys` (
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
	incarnation  BIGINT         NOT NULL DEFAULT 0,
	PRIMARY KEY (shard_key, `key`),
	KEY `idem_keys_expires_at` (expires_at)
) ENGINE=InnoDB

-- ShardColumnSchema[1]
CREATE PROCEDURE IF NOT EXISTS `app`.`idem_keys_claim_int64`(IN s BIGINT, IN k VARBINARY(512), IN h VARBINARY(64), IN tok BIGINT, IN inc BIGINT, IN ca BIGINT, IN ea BIGINT, IN w INT)
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
	INSERT INTO `app`.`idem_keys` (shard_key, `key`, request_hash, token, incarnation, created_at, expires_at)
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
			SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation INTO rh, st, hd, bd, cs, c, e, t, i FROM `app`.`idem_keys` WHERE shard_key = s AND `key` = k FOR UPDATE;
			IF e <= ca THEN
				UPDATE `app`.`idem_keys` SET request_hash = h, created_at = ca, expires_at = ea,
					token = tok, incarnation = inc, status = NULL, header = NULL, body = NULL, checksum = NULL
				WHERE shard_key = s AND `key` = k;
				SET rh = h, st = NULL, hd = NULL, bd = NULL, cs = NULL, c = ca, e = ea, t = tok, i = inc;
			END IF;
			SELECT t <=> tok, FALSE, rh, st, hd, bd, cs, c, e, t, i;
		END;
	END IF;
END

-- ShardColumnCheck (type BIGINT)
SELECT COUNT(*), COALESCE(SUM(DATA_TYPE = 'bigint' AND COLUMN_TYPE NOT LIKE '%unsigned%'), 0) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'idem_keys' AND COLUMN_NAME = 'shard_key'

-- ShardColumnStatements.Claim
CALL `app`.`idem_keys_claim_int64`({shard}, {key}, {request_hash}, {token}, {incarnation}, {created_at}, {expires_at}, 3)

-- ShardColumnStatements.ClaimedWithoutRow: true

-- ShardColumnStatements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key}

-- ShardColumnStatements.Complete
UPDATE `app`.`idem_keys` SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.Abandon
DELETE FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.PurgeSelect
SELECT shard_key, `key` FROM `app`.`idem_keys` WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit} FOR UPDATE SKIP LOCKED

-- ShardColumnStatements.PurgeDelete
DELETE p FROM `app`.`idem_keys` AS p FORCE INDEX (PRIMARY) WHERE (p.shard_key, p.`key`) IN ({keys}) AND p.expires_at <= {now}

-- ShardColumnStatements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM `app`.`idem_keys`

-- ShardColumnStatements.CountExpired
SELECT COUNT(*) FROM `app`.`idem_keys` WHERE expires_at <= {now}

-- ShardColumnStatements.Run.Start
UPDATE `app`.`idem_keys` SET phase = {phase}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Progress
SELECT phase, lease_until, token, created_at, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} AND status IS NULL AND phase IS NOT NULL FOR UPDATE NOWAIT

-- ShardColumnStatements.Run.Takeover
UPDATE `app`.`idem_keys` SET token = {token}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})

-- ShardColumnStatements.Run.Advance
UPDATE `app`.`idem_keys` SET token = {token}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {prev_token} AND status IS NULL

-- ShardColumnStatements.Run.Mark
UPDATE `app`.`idem_keys` SET phase = {phase}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Renew
UPDATE `app`.`idem_keys` SET lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Finish
UPDATE `app`.`idem_keys` SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Release
UPDATE `app`.`idem_keys` SET lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) WHERE shard_key = {shard} AND `key` = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- ShardColumnStatements.Run.Unfinished
SELECT shard_key, `key`, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys`
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Resumable
SELECT shard_key, `key`, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys`
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Backoff
UPDATE `app`.`idem_keys` SET resume_backoff = LEAST({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = GREATEST(lease_until, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})) WHERE shard_key = {shard} AND `key` = {key} AND status IS NULL AND phase IS NOT NULL

-- ===== a shard column of kind text(64)

-- ShardColumnSchema[0]
CREATE TABLE IF NOT EXISTS `app`.`idem_keys` (
	shard_key    VARBINARY(64) NOT NULL,
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
	incarnation  BIGINT         NOT NULL DEFAULT 0,
	PRIMARY KEY (shard_key, `key`),
	KEY `idem_keys_expires_at` (expires_at)
) ENGINE=InnoDB

-- ShardColumnSchema[1]
CREATE PROCEDURE IF NOT EXISTS `app`.`idem_keys_claim_bytes`(IN s VARBINARY(255), IN k VARBINARY(512), IN h VARBINARY(64), IN tok BIGINT, IN inc BIGINT, IN ca BIGINT, IN ea BIGINT, IN w INT)
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
	INSERT INTO `app`.`idem_keys` (shard_key, `key`, request_hash, token, incarnation, created_at, expires_at)
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
			SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation INTO rh, st, hd, bd, cs, c, e, t, i FROM `app`.`idem_keys` WHERE shard_key = s AND `key` = k FOR UPDATE;
			IF e <= ca THEN
				UPDATE `app`.`idem_keys` SET request_hash = h, created_at = ca, expires_at = ea,
					token = tok, incarnation = inc, status = NULL, header = NULL, body = NULL, checksum = NULL
				WHERE shard_key = s AND `key` = k;
				SET rh = h, st = NULL, hd = NULL, bd = NULL, cs = NULL, c = ca, e = ea, t = tok, i = inc;
			END IF;
			SELECT t <=> tok, FALSE, rh, st, hd, bd, cs, c, e, t, i;
		END;
	END IF;
END

-- ShardColumnCheck (type VARBINARY(64))
SELECT COUNT(*), COALESCE(SUM(DATA_TYPE = 'varbinary' AND CHARACTER_MAXIMUM_LENGTH >= 64), 0) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'idem_keys' AND COLUMN_NAME = 'shard_key'

-- ShardColumnStatements.Claim
CALL `app`.`idem_keys_claim_bytes`({shard}, {key}, {request_hash}, {token}, {incarnation}, {created_at}, {expires_at}, 3)

-- ShardColumnStatements.ClaimedWithoutRow: true

-- ShardColumnStatements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key}

-- ShardColumnStatements.Complete
UPDATE `app`.`idem_keys` SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.Abandon
DELETE FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.PurgeSelect
SELECT shard_key, `key` FROM `app`.`idem_keys` WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit} FOR UPDATE SKIP LOCKED

-- ShardColumnStatements.PurgeDelete
DELETE p FROM `app`.`idem_keys` AS p FORCE INDEX (PRIMARY) WHERE (p.shard_key, p.`key`) IN ({keys}) AND p.expires_at <= {now}

-- ShardColumnStatements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM `app`.`idem_keys`

-- ShardColumnStatements.CountExpired
SELECT COUNT(*) FROM `app`.`idem_keys` WHERE expires_at <= {now}

-- ShardColumnStatements.Run.Start
UPDATE `app`.`idem_keys` SET phase = {phase}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Progress
SELECT phase, lease_until, token, created_at, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} AND status IS NULL AND phase IS NOT NULL FOR UPDATE NOWAIT

-- ShardColumnStatements.Run.Takeover
UPDATE `app`.`idem_keys` SET token = {token}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})

-- ShardColumnStatements.Run.Advance
UPDATE `app`.`idem_keys` SET token = {token}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {prev_token} AND status IS NULL

-- ShardColumnStatements.Run.Mark
UPDATE `app`.`idem_keys` SET phase = {phase}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Renew
UPDATE `app`.`idem_keys` SET lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Finish
UPDATE `app`.`idem_keys` SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Release
UPDATE `app`.`idem_keys` SET lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) WHERE shard_key = {shard} AND `key` = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- ShardColumnStatements.Run.Unfinished
SELECT shard_key, `key`, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys`
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Resumable
SELECT shard_key, `key`, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys`
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Backoff
UPDATE `app`.`idem_keys` SET resume_backoff = LEAST({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = GREATEST(lease_until, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})) WHERE shard_key = {shard} AND `key` = {key} AND status IS NULL AND phase IS NOT NULL

-- ===== a shard column of kind bytes(16)

-- ShardColumnSchema[0]
CREATE TABLE IF NOT EXISTS `app`.`idem_keys` (
	shard_key    VARBINARY(16) NOT NULL,
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
	incarnation  BIGINT         NOT NULL DEFAULT 0,
	PRIMARY KEY (shard_key, `key`),
	KEY `idem_keys_expires_at` (expires_at)
) ENGINE=InnoDB

-- ShardColumnSchema[1]
CREATE PROCEDURE IF NOT EXISTS `app`.`idem_keys_claim_bytes`(IN s VARBINARY(255), IN k VARBINARY(512), IN h VARBINARY(64), IN tok BIGINT, IN inc BIGINT, IN ca BIGINT, IN ea BIGINT, IN w INT)
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
	INSERT INTO `app`.`idem_keys` (shard_key, `key`, request_hash, token, incarnation, created_at, expires_at)
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
			SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation INTO rh, st, hd, bd, cs, c, e, t, i FROM `app`.`idem_keys` WHERE shard_key = s AND `key` = k FOR UPDATE;
			IF e <= ca THEN
				UPDATE `app`.`idem_keys` SET request_hash = h, created_at = ca, expires_at = ea,
					token = tok, incarnation = inc, status = NULL, header = NULL, body = NULL, checksum = NULL
				WHERE shard_key = s AND `key` = k;
				SET rh = h, st = NULL, hd = NULL, bd = NULL, cs = NULL, c = ca, e = ea, t = tok, i = inc;
			END IF;
			SELECT t <=> tok, FALSE, rh, st, hd, bd, cs, c, e, t, i;
		END;
	END IF;
END

-- ShardColumnCheck (type VARBINARY(16))
SELECT COUNT(*), COALESCE(SUM(DATA_TYPE = 'varbinary' AND CHARACTER_MAXIMUM_LENGTH >= 16), 0) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'idem_keys' AND COLUMN_NAME = 'shard_key'

-- ShardColumnStatements.Claim
CALL `app`.`idem_keys_claim_bytes`({shard}, {key}, {request_hash}, {token}, {incarnation}, {created_at}, {expires_at}, 3)

-- ShardColumnStatements.ClaimedWithoutRow: true

-- ShardColumnStatements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key}

-- ShardColumnStatements.Complete
UPDATE `app`.`idem_keys` SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.Abandon
DELETE FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.PurgeSelect
SELECT shard_key, `key` FROM `app`.`idem_keys` WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit} FOR UPDATE SKIP LOCKED

-- ShardColumnStatements.PurgeDelete
DELETE p FROM `app`.`idem_keys` AS p FORCE INDEX (PRIMARY) WHERE (p.shard_key, p.`key`) IN ({keys}) AND p.expires_at <= {now}

-- ShardColumnStatements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM `app`.`idem_keys`

-- ShardColumnStatements.CountExpired
SELECT COUNT(*) FROM `app`.`idem_keys` WHERE expires_at <= {now}

-- ShardColumnStatements.Run.Start
UPDATE `app`.`idem_keys` SET phase = {phase}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Progress
SELECT phase, lease_until, token, created_at, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} AND status IS NULL AND phase IS NOT NULL FOR UPDATE NOWAIT

-- ShardColumnStatements.Run.Takeover
UPDATE `app`.`idem_keys` SET token = {token}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})

-- ShardColumnStatements.Run.Advance
UPDATE `app`.`idem_keys` SET token = {token}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {prev_token} AND status IS NULL

-- ShardColumnStatements.Run.Mark
UPDATE `app`.`idem_keys` SET phase = {phase}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Renew
UPDATE `app`.`idem_keys` SET lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Finish
UPDATE `app`.`idem_keys` SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Release
UPDATE `app`.`idem_keys` SET lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) WHERE shard_key = {shard} AND `key` = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- ShardColumnStatements.Run.Unfinished
SELECT shard_key, `key`, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys`
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Resumable
SELECT shard_key, `key`, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys`
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Backoff
UPDATE `app`.`idem_keys` SET resume_backoff = LEAST({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = GREATEST(lease_until, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})) WHERE shard_key = {shard} AND `key` = {key} AND status IS NULL AND phase IS NOT NULL

-- ===== a shard column of kind uuid

-- ShardColumnSchema[0]
CREATE TABLE IF NOT EXISTS `app`.`idem_keys` (
	shard_key    BINARY(36) NOT NULL,
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
	incarnation  BIGINT         NOT NULL DEFAULT 0,
	PRIMARY KEY (shard_key, `key`),
	KEY `idem_keys_expires_at` (expires_at)
) ENGINE=InnoDB

-- ShardColumnSchema[1]
CREATE PROCEDURE IF NOT EXISTS `app`.`idem_keys_claim_bytes`(IN s VARBINARY(255), IN k VARBINARY(512), IN h VARBINARY(64), IN tok BIGINT, IN inc BIGINT, IN ca BIGINT, IN ea BIGINT, IN w INT)
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
	INSERT INTO `app`.`idem_keys` (shard_key, `key`, request_hash, token, incarnation, created_at, expires_at)
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
			SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation INTO rh, st, hd, bd, cs, c, e, t, i FROM `app`.`idem_keys` WHERE shard_key = s AND `key` = k FOR UPDATE;
			IF e <= ca THEN
				UPDATE `app`.`idem_keys` SET request_hash = h, created_at = ca, expires_at = ea,
					token = tok, incarnation = inc, status = NULL, header = NULL, body = NULL, checksum = NULL
				WHERE shard_key = s AND `key` = k;
				SET rh = h, st = NULL, hd = NULL, bd = NULL, cs = NULL, c = ca, e = ea, t = tok, i = inc;
			END IF;
			SELECT t <=> tok, FALSE, rh, st, hd, bd, cs, c, e, t, i;
		END;
	END IF;
END

-- ShardColumnCheck (type BINARY(36))
SELECT COUNT(*), COALESCE(SUM(DATA_TYPE = 'binary' AND CHARACTER_MAXIMUM_LENGTH = 36), 0) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'idem_keys' AND COLUMN_NAME = 'shard_key'

-- ShardColumnStatements.Claim
CALL `app`.`idem_keys_claim_bytes`({shard}, {key}, {request_hash}, {token}, {incarnation}, {created_at}, {expires_at}, 3)

-- ShardColumnStatements.ClaimedWithoutRow: true

-- ShardColumnStatements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key}

-- ShardColumnStatements.Complete
UPDATE `app`.`idem_keys` SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.Abandon
DELETE FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.PurgeSelect
SELECT shard_key, `key` FROM `app`.`idem_keys` WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit} FOR UPDATE SKIP LOCKED

-- ShardColumnStatements.PurgeDelete
DELETE p FROM `app`.`idem_keys` AS p FORCE INDEX (PRIMARY) WHERE (p.shard_key, p.`key`) IN ({keys}) AND p.expires_at <= {now}

-- ShardColumnStatements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM `app`.`idem_keys`

-- ShardColumnStatements.CountExpired
SELECT COUNT(*) FROM `app`.`idem_keys` WHERE expires_at <= {now}

-- ShardColumnStatements.Run.Start
UPDATE `app`.`idem_keys` SET phase = {phase}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Progress
SELECT phase, lease_until, token, created_at, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} AND status IS NULL AND phase IS NOT NULL FOR UPDATE NOWAIT

-- ShardColumnStatements.Run.Takeover
UPDATE `app`.`idem_keys` SET token = {token}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})

-- ShardColumnStatements.Run.Advance
UPDATE `app`.`idem_keys` SET token = {token}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {prev_token} AND status IS NULL

-- ShardColumnStatements.Run.Mark
UPDATE `app`.`idem_keys` SET phase = {phase}, lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Renew
UPDATE `app`.`idem_keys` SET lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Finish
UPDATE `app`.`idem_keys` SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE shard_key = {shard} AND `key` = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Release
UPDATE `app`.`idem_keys` SET lease_until = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}) WHERE shard_key = {shard} AND `key` = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- ShardColumnStatements.Run.Unfinished
SELECT shard_key, `key`, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys`
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Resumable
SELECT shard_key, `key`, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset}), incarnation FROM `app`.`idem_keys`
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Backoff
UPDATE `app`.`idem_keys` SET resume_backoff = LEAST({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = GREATEST(lease_until, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + {clock_offset})) WHERE shard_key = {shard} AND `key` = {key} AND status IS NULL AND phase IS NOT NULL
