-- The vitess dialect on table app.idem_keys, lock timeout 2.5s. Written by
-- go test ./dialect -run TestStatementsGolden -update

-- Capabilities: {OneWriter:false ConflictAtCommit:false MinLockWait:1s ShardedByKey:true MaxPurgeBatch:0 ReadsUncommitted:false KeepsIsolation:true}

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
SELECT token = {token}, 0, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE `key` = {key} FOR UPDATE

-- Statements.ClaimedWithoutRow: false

-- Statements.ClaimWrite
INSERT INTO `app`.`idem_keys` (`key`, request_hash, token, incarnation, created_at, expires_at)
VALUES ({key}, {request_hash}, {token}, {incarnation}, {created_at}, {expires_at})
ON DUPLICATE KEY UPDATE
	request_hash = IF(expires_at <= VALUES(created_at), VALUES(request_hash), request_hash),
	status       = IF(expires_at <= VALUES(created_at), NULL, status),
	header       = IF(expires_at <= VALUES(created_at), NULL, header),
	body         = IF(expires_at <= VALUES(created_at), NULL, body),
	checksum     = IF(expires_at <= VALUES(created_at), NULL, checksum),
	token        = IF(expires_at <= VALUES(created_at), VALUES(token), token),
	incarnation  = IF(expires_at <= VALUES(created_at), VALUES(incarnation), incarnation),
	created_at   = IF(expires_at <= VALUES(created_at), VALUES(created_at), created_at),
	expires_at   = IF(expires_at <= VALUES(created_at), VALUES(expires_at), expires_at)

-- Statements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE `key` = {key}

-- Statements.Complete
UPDATE `app`.`idem_keys` SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE `key` = {key} AND token = {token}

-- Statements.Abandon
DELETE FROM `app`.`idem_keys` WHERE `key` = {key} AND token = {token}

-- Statements.PurgeSelect
SELECT `key` FROM `app`.`idem_keys` WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit} FOR UPDATE SKIP LOCKED

-- Statements.PurgeDelete
DELETE /*+ INDEX(p PRIMARY) */ FROM `app`.`idem_keys` AS p WHERE p.`key` IN ({keys}) AND p.expires_at <= {now}

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

-- ShardColumnCheck (type BIGINT)
SELECT COUNT(*), COALESCE(SUM(DATA_TYPE = 'bigint' AND COLUMN_TYPE NOT LIKE '%unsigned%'), 0) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'idem_keys' AND COLUMN_NAME = 'shard_key'

-- ShardColumnStatements.Claim
SELECT token = {token}, 0, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} FOR UPDATE

-- ShardColumnStatements.ClaimedWithoutRow: false

-- ShardColumnStatements.ClaimWrite
INSERT INTO `app`.`idem_keys` (shard_key, `key`, request_hash, token, incarnation, created_at, expires_at)
VALUES ({shard}, {key}, {request_hash}, {token}, {incarnation}, {created_at}, {expires_at})
ON DUPLICATE KEY UPDATE
	request_hash = IF(expires_at <= VALUES(created_at), VALUES(request_hash), request_hash),
	status       = IF(expires_at <= VALUES(created_at), NULL, status),
	header       = IF(expires_at <= VALUES(created_at), NULL, header),
	body         = IF(expires_at <= VALUES(created_at), NULL, body),
	checksum     = IF(expires_at <= VALUES(created_at), NULL, checksum),
	token        = IF(expires_at <= VALUES(created_at), VALUES(token), token),
	incarnation  = IF(expires_at <= VALUES(created_at), VALUES(incarnation), incarnation),
	created_at   = IF(expires_at <= VALUES(created_at), VALUES(created_at), created_at),
	expires_at   = IF(expires_at <= VALUES(created_at), VALUES(expires_at), expires_at)

-- ShardColumnStatements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key}

-- ShardColumnStatements.Complete
UPDATE `app`.`idem_keys` SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.Abandon
DELETE FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.PurgeSelect
SELECT shard_key, `key` FROM `app`.`idem_keys` WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit} FOR UPDATE SKIP LOCKED

-- ShardColumnStatements.PurgeDelete
DELETE /*+ INDEX(p PRIMARY) */ FROM `app`.`idem_keys` AS p WHERE (p.shard_key, p.`key`) IN ({keys}) AND p.expires_at <= {now}

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

-- ShardColumnCheck (type VARBINARY(64))
SELECT COUNT(*), COALESCE(SUM(DATA_TYPE = 'varbinary' AND CHARACTER_MAXIMUM_LENGTH >= 64), 0) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'idem_keys' AND COLUMN_NAME = 'shard_key'

-- ShardColumnStatements.Claim
SELECT token = {token}, 0, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} FOR UPDATE

-- ShardColumnStatements.ClaimedWithoutRow: false

-- ShardColumnStatements.ClaimWrite
INSERT INTO `app`.`idem_keys` (shard_key, `key`, request_hash, token, incarnation, created_at, expires_at)
VALUES ({shard}, {key}, {request_hash}, {token}, {incarnation}, {created_at}, {expires_at})
ON DUPLICATE KEY UPDATE
	request_hash = IF(expires_at <= VALUES(created_at), VALUES(request_hash), request_hash),
	status       = IF(expires_at <= VALUES(created_at), NULL, status),
	header       = IF(expires_at <= VALUES(created_at), NULL, header),
	body         = IF(expires_at <= VALUES(created_at), NULL, body),
	checksum     = IF(expires_at <= VALUES(created_at), NULL, checksum),
	token        = IF(expires_at <= VALUES(created_at), VALUES(token), token),
	incarnation  = IF(expires_at <= VALUES(created_at), VALUES(incarnation), incarnation),
	created_at   = IF(expires_at <= VALUES(created_at), VALUES(created_at), created_at),
	expires_at   = IF(expires_at <= VALUES(created_at), VALUES(expires_at), expires_at)

-- ShardColumnStatements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key}

-- ShardColumnStatements.Complete
UPDATE `app`.`idem_keys` SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.Abandon
DELETE FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.PurgeSelect
SELECT shard_key, `key` FROM `app`.`idem_keys` WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit} FOR UPDATE SKIP LOCKED

-- ShardColumnStatements.PurgeDelete
DELETE /*+ INDEX(p PRIMARY) */ FROM `app`.`idem_keys` AS p WHERE (p.shard_key, p.`key`) IN ({keys}) AND p.expires_at <= {now}

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

-- ShardColumnCheck (type VARBINARY(16))
SELECT COUNT(*), COALESCE(SUM(DATA_TYPE = 'varbinary' AND CHARACTER_MAXIMUM_LENGTH >= 16), 0) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'idem_keys' AND COLUMN_NAME = 'shard_key'

-- ShardColumnStatements.Claim
SELECT token = {token}, 0, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} FOR UPDATE

-- ShardColumnStatements.ClaimedWithoutRow: false

-- ShardColumnStatements.ClaimWrite
INSERT INTO `app`.`idem_keys` (shard_key, `key`, request_hash, token, incarnation, created_at, expires_at)
VALUES ({shard}, {key}, {request_hash}, {token}, {incarnation}, {created_at}, {expires_at})
ON DUPLICATE KEY UPDATE
	request_hash = IF(expires_at <= VALUES(created_at), VALUES(request_hash), request_hash),
	status       = IF(expires_at <= VALUES(created_at), NULL, status),
	header       = IF(expires_at <= VALUES(created_at), NULL, header),
	body         = IF(expires_at <= VALUES(created_at), NULL, body),
	checksum     = IF(expires_at <= VALUES(created_at), NULL, checksum),
	token        = IF(expires_at <= VALUES(created_at), VALUES(token), token),
	incarnation  = IF(expires_at <= VALUES(created_at), VALUES(incarnation), incarnation),
	created_at   = IF(expires_at <= VALUES(created_at), VALUES(created_at), created_at),
	expires_at   = IF(expires_at <= VALUES(created_at), VALUES(expires_at), expires_at)

-- ShardColumnStatements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key}

-- ShardColumnStatements.Complete
UPDATE `app`.`idem_keys` SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.Abandon
DELETE FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.PurgeSelect
SELECT shard_key, `key` FROM `app`.`idem_keys` WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit} FOR UPDATE SKIP LOCKED

-- ShardColumnStatements.PurgeDelete
DELETE /*+ INDEX(p PRIMARY) */ FROM `app`.`idem_keys` AS p WHERE (p.shard_key, p.`key`) IN ({keys}) AND p.expires_at <= {now}

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

-- ShardColumnCheck (type BINARY(36))
SELECT COUNT(*), COALESCE(SUM(DATA_TYPE = 'binary' AND CHARACTER_MAXIMUM_LENGTH = 36), 0) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'idem_keys' AND COLUMN_NAME = 'shard_key'

-- ShardColumnStatements.Claim
SELECT token = {token}, 0, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} FOR UPDATE

-- ShardColumnStatements.ClaimedWithoutRow: false

-- ShardColumnStatements.ClaimWrite
INSERT INTO `app`.`idem_keys` (shard_key, `key`, request_hash, token, incarnation, created_at, expires_at)
VALUES ({shard}, {key}, {request_hash}, {token}, {incarnation}, {created_at}, {expires_at})
ON DUPLICATE KEY UPDATE
	request_hash = IF(expires_at <= VALUES(created_at), VALUES(request_hash), request_hash),
	status       = IF(expires_at <= VALUES(created_at), NULL, status),
	header       = IF(expires_at <= VALUES(created_at), NULL, header),
	body         = IF(expires_at <= VALUES(created_at), NULL, body),
	checksum     = IF(expires_at <= VALUES(created_at), NULL, checksum),
	token        = IF(expires_at <= VALUES(created_at), VALUES(token), token),
	incarnation  = IF(expires_at <= VALUES(created_at), VALUES(incarnation), incarnation),
	created_at   = IF(expires_at <= VALUES(created_at), VALUES(created_at), created_at),
	expires_at   = IF(expires_at <= VALUES(created_at), VALUES(expires_at), expires_at)

-- ShardColumnStatements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key}

-- ShardColumnStatements.Complete
UPDATE `app`.`idem_keys` SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.Abandon
DELETE FROM `app`.`idem_keys` WHERE shard_key = {shard} AND `key` = {key} AND token = {token}

-- ShardColumnStatements.PurgeSelect
SELECT shard_key, `key` FROM `app`.`idem_keys` WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit} FOR UPDATE SKIP LOCKED

-- ShardColumnStatements.PurgeDelete
DELETE /*+ INDEX(p PRIMARY) */ FROM `app`.`idem_keys` AS p WHERE (p.shard_key, p.`key`) IN ({keys}) AND p.expires_at <= {now}

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
