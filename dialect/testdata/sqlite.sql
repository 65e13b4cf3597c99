-- The sqlite dialect on table app.idem_keys, lock timeout 2.5s. Written by
-- go test ./dialect -run TestStatementsGolden -update

-- Capabilities: {OneWriter:true ConflictAtCommit:false MinLockWait:0s ShardedByKey:false MaxPurgeBatch:0 ReadsUncommitted:false KeepsIsolation:false}

-- Schema[0]
CREATE TABLE IF NOT EXISTS "app"."idem_keys" (
	key          BLOB    NOT NULL PRIMARY KEY,
	request_hash BLOB    NOT NULL,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	status       INTEGER,
	header       BLOB,
	body         BLOB,
	checksum     BLOB,
	token        INTEGER NOT NULL DEFAULT 0,
	phase        TEXT,
	lease_until  INTEGER,
	resume_backoff INTEGER,
	incarnation  INTEGER NOT NULL DEFAULT 0
)

-- Schema[1]
CREATE INDEX IF NOT EXISTS "app"."idem_keys_expires_at" ON "idem_keys" (expires_at)

-- Upgrades[0].Check
SELECT count(*) FROM pragma_table_info('idem_keys', 'app') WHERE name = 'token'

-- Upgrades[0].Apply
ALTER TABLE "app"."idem_keys" ADD COLUMN token INTEGER NOT NULL DEFAULT 0

-- Upgrades[1].Check
SELECT count(*) FROM pragma_table_info('idem_keys', 'app') WHERE name = 'phase'

-- Upgrades[1].Apply
ALTER TABLE "app"."idem_keys" ADD COLUMN phase TEXT

-- Upgrades[2].Check
SELECT count(*) FROM pragma_table_info('idem_keys', 'app') WHERE name = 'lease_until'

-- Upgrades[2].Apply
ALTER TABLE "app"."idem_keys" ADD COLUMN lease_until INTEGER

-- Upgrades[3].Check
SELECT count(*) FROM pragma_table_info('idem_keys', 'app') WHERE name = 'resume_backoff'

-- Upgrades[3].Apply
ALTER TABLE "app"."idem_keys" ADD COLUMN resume_backoff INTEGER

-- Upgrades[4].Check
SELECT count(*) FROM pragma_table_info('idem_keys', 'app') WHERE name = 'incarnation'

-- Upgrades[4].Apply
ALTER TABLE "app"."idem_keys" ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 0

-- Statements.Claim
INSERT INTO "app"."idem_keys" (key, request_hash, created_at, expires_at, token, incarnation)
VALUES ({key}, {request_hash}, {created_at}, {expires_at}, {token}, {incarnation})
ON CONFLICT (key) DO NOTHING
RETURNING 1, 0, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation

-- Statements.ClaimedWithoutRow: false

-- Statements.Takeover
UPDATE "app"."idem_keys" SET request_hash = {request_hash}, created_at = {created_at}, expires_at = {expires_at},
	token = {token}, incarnation = {incarnation}, status = NULL, header = NULL, body = NULL, checksum = NULL
WHERE key = {key} AND expires_at <= {created_at}

-- Statements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM "app"."idem_keys" WHERE key = {key}

-- Statements.Complete
UPDATE "app"."idem_keys" SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE key = {key} AND token = {token}

-- Statements.Abandon
DELETE FROM "app"."idem_keys" WHERE key = {key} AND token = {token}

-- Statements.Purge
DELETE FROM "app"."idem_keys" WHERE key IN (SELECT key FROM "app"."idem_keys" WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})

-- Statements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM "app"."idem_keys"

-- Statements.CountExpired
SELECT COUNT(*) FROM "app"."idem_keys" WHERE expires_at <= {now}

-- Statements.Run.Start
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE key = {key} AND token = {token} AND status IS NULL

-- Statements.Run.Progress
SELECT phase, lease_until, token, created_at, (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys" WHERE key = {key} AND status IS NULL AND phase IS NOT NULL

-- Statements.Run.Takeover
UPDATE "app"."idem_keys" SET token = {token}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE key = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})

-- Statements.Run.Advance
UPDATE "app"."idem_keys" SET token = {token}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE key = {key} AND token = {prev_token} AND status IS NULL

-- Statements.Run.Mark
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE key = {key} AND token = {token} AND status IS NULL

-- Statements.Run.Renew
UPDATE "app"."idem_keys" SET lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE key = {key} AND token = {token} AND status IS NULL

-- Statements.Run.Finish
UPDATE "app"."idem_keys" SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE key = {key} AND token = {token} AND status IS NULL

-- Statements.Run.Release
UPDATE "app"."idem_keys" SET lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) WHERE key = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- Statements.Run.Unfinished
SELECT key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- Statements.Run.Resumable
SELECT key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- Statements.Run.Backoff
UPDATE "app"."idem_keys" SET resume_backoff = min({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = max(lease_until, (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})) WHERE key = {key} AND status IS NULL AND phase IS NOT NULL

-- ===== a shard column of kind int64

-- ShardColumnSchema[0]
CREATE TABLE IF NOT EXISTS "app"."idem_keys" (
	shard_key    INTEGER NOT NULL,
	key          BLOB    NOT NULL,
	request_hash BLOB    NOT NULL,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	status       INTEGER,
	header       BLOB,
	body         BLOB,
	checksum     BLOB,
	token        INTEGER NOT NULL DEFAULT 0,
	phase        TEXT,
	lease_until  INTEGER,
	resume_backoff INTEGER,
	incarnation  INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (shard_key, key)
)

-- ShardColumnSchema[1]
CREATE INDEX IF NOT EXISTS "app"."idem_keys_expires_at" ON "idem_keys" (expires_at)

-- ShardColumnCheck (type INTEGER)
SELECT count(*), count(*) FILTER (WHERE CASE WHEN instr(upper(type), 'INT') > 0 THEN 'INTEGER' WHEN instr(upper(type), 'CHAR') > 0 OR instr(upper(type), 'CLOB') > 0 OR instr(upper(type), 'TEXT') > 0 THEN 'TEXT' WHEN instr(upper(type), 'BLOB') > 0 OR trim(upper(type)) = '' THEN 'BLOB' ELSE 'NUMERIC' END = 'INTEGER') FROM pragma_table_info('idem_keys', 'app') WHERE name = 'shard_key'

-- ShardColumnStatements.Claim
INSERT INTO "app"."idem_keys" (shard_key, key, request_hash, created_at, expires_at, token, incarnation)
VALUES ({shard}, {key}, {request_hash}, {created_at}, {expires_at}, {token}, {incarnation})
ON CONFLICT (shard_key, key) DO NOTHING
RETURNING 1, 0, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation

-- ShardColumnStatements.ClaimedWithoutRow: false

-- ShardColumnStatements.Takeover
UPDATE "app"."idem_keys" SET request_hash = {request_hash}, created_at = {created_at}, expires_at = {expires_at},
	token = {token}, incarnation = {incarnation}, status = NULL, header = NULL, body = NULL, checksum = NULL
WHERE shard_key = {shard} AND key = {key} AND expires_at <= {created_at}

-- ShardColumnStatements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key}

-- ShardColumnStatements.Complete
UPDATE "app"."idem_keys" SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE shard_key = {shard} AND key = {key} AND token = {token}

-- ShardColumnStatements.Abandon
DELETE FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key} AND token = {token}

-- ShardColumnStatements.Purge
DELETE FROM "app"."idem_keys" WHERE (shard_key, key) IN (SELECT shard_key, key FROM "app"."idem_keys" WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})

-- ShardColumnStatements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM "app"."idem_keys"

-- ShardColumnStatements.CountExpired
SELECT COUNT(*) FROM "app"."idem_keys" WHERE expires_at <= {now}

-- ShardColumnStatements.Run.Start
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Progress
SELECT phase, lease_until, token, created_at, (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ShardColumnStatements.Run.Takeover
UPDATE "app"."idem_keys" SET token = {token}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})

-- ShardColumnStatements.Run.Advance
UPDATE "app"."idem_keys" SET token = {token}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL

-- ShardColumnStatements.Run.Mark
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Renew
UPDATE "app"."idem_keys" SET lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Finish
UPDATE "app"."idem_keys" SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Release
UPDATE "app"."idem_keys" SET lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) WHERE shard_key = {shard} AND key = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- ShardColumnStatements.Run.Unfinished
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Resumable
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Backoff
UPDATE "app"."idem_keys" SET resume_backoff = min({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = max(lease_until, (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})) WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ===== a shard column of kind text(64)

-- ShardColumnSchema[0]
CREATE TABLE IF NOT EXISTS "app"."idem_keys" (
	shard_key    TEXT NOT NULL,
	key          BLOB    NOT NULL,
	request_hash BLOB    NOT NULL,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	status       INTEGER,
	header       BLOB,
	body         BLOB,
	checksum     BLOB,
	token        INTEGER NOT NULL DEFAULT 0,
	phase        TEXT,
	lease_until  INTEGER,
	resume_backoff INTEGER,
	incarnation  INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (shard_key, key)
)

-- ShardColumnSchema[1]
CREATE INDEX IF NOT EXISTS "app"."idem_keys_expires_at" ON "idem_keys" (expires_at)

-- ShardColumnCheck (type TEXT)
SELECT count(*), count(*) FILTER (WHERE CASE WHEN instr(upper(type), 'INT') > 0 THEN 'INTEGER' WHEN instr(upper(type), 'CHAR') > 0 OR instr(upper(type), 'CLOB') > 0 OR instr(upper(type), 'TEXT') > 0 THEN 'TEXT' WHEN instr(upper(type), 'BLOB') > 0 OR trim(upper(type)) = '' THEN 'BLOB' ELSE 'NUMERIC' END = 'TEXT') FROM pragma_table_info('idem_keys', 'app') WHERE name = 'shard_key'

-- ShardColumnStatements.Claim
INSERT INTO "app"."idem_keys" (shard_key, key, request_hash, created_at, expires_at, token, incarnation)
VALUES ({shard}, {key}, {request_hash}, {created_at}, {expires_at}, {token}, {incarnation})
ON CONFLICT (shard_key, key) DO NOTHING
RETURNING 1, 0, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation

-- ShardColumnStatements.ClaimedWithoutRow: false

-- ShardColumnStatements.Takeover
UPDATE "app"."idem_keys" SET request_hash = {request_hash}, created_at = {created_at}, expires_at = {expires_at},
	token = {token}, incarnation = {incarnation}, status = NULL, header = NULL, body = NULL, checksum = NULL
WHERE shard_key = {shard} AND key = {key} AND expires_at <= {created_at}

-- ShardColumnStatements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key}

-- ShardColumnStatements.Complete
UPDATE "app"."idem_keys" SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE shard_key = {shard} AND key = {key} AND token = {token}

-- ShardColumnStatements.Abandon
DELETE FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key} AND token = {token}

-- ShardColumnStatements.Purge
DELETE FROM "app"."idem_keys" WHERE (shard_key, key) IN (SELECT shard_key, key FROM "app"."idem_keys" WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})

-- ShardColumnStatements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM "app"."idem_keys"

-- ShardColumnStatements.CountExpired
SELECT COUNT(*) FROM "app"."idem_keys" WHERE expires_at <= {now}

-- ShardColumnStatements.Run.Start
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Progress
SELECT phase, lease_until, token, created_at, (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ShardColumnStatements.Run.Takeover
UPDATE "app"."idem_keys" SET token = {token}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})

-- ShardColumnStatements.Run.Advance
UPDATE "app"."idem_keys" SET token = {token}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL

-- ShardColumnStatements.Run.Mark
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Renew
UPDATE "app"."idem_keys" SET lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Finish
UPDATE "app"."idem_keys" SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Release
UPDATE "app"."idem_keys" SET lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) WHERE shard_key = {shard} AND key = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- ShardColumnStatements.Run.Unfinished
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Resumable
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Backoff
UPDATE "app"."idem_keys" SET resume_backoff = min({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = max(lease_until, (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})) WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ===== a shard column of kind bytes(16)

-- ShardColumnSchema[0]
CREATE TABLE IF NOT EXISTS "app"."idem_keys" (
	shard_key    BLOB NOT NULL,
	key          BLOB    NOT NULL,
	request_hash BLOB    NOT NULL,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	status       INTEGER,
	header       BLOB,
	body         BLOB,
	checksum     BLOB,
	token        INTEGER NOT NULL DEFAULT 0,
	phase        TEXT,
	lease_until  INTEGER,
	resume_backoff INTEGER,
	incarnation  INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (shard_key, key)
)

-- ShardColumnSchema[1]
CREATE INDEX IF NOT EXISTS "app"."idem_keys_expires_at" ON "idem_keys" (expires_at)

-- ShardColumnCheck (type BLOB)
SELECT count(*), count(*) FILTER (WHERE CASE WHEN instr(upper(type), 'INT') > 0 THEN 'INTEGER' WHEN instr(upper(type), 'CHAR') > 0 OR instr(upper(type), 'CLOB') > 0 OR instr(upper(type), 'TEXT') > 0 THEN 'TEXT' WHEN instr(upper(type), 'BLOB') > 0 OR trim(upper(type)) = '' THEN 'BLOB' ELSE 'NUMERIC' END = 'BLOB') FROM pragma_table_info('idem_keys', 'app') WHERE name = 'shard_key'

-- ShardColumnStatements.Claim
INSERT INTO "app"."idem_keys" (shard_key, key, request_hash, created_at, expires_at, token, incarnation)
VALUES ({shard}, {key}, {request_hash}, {created_at}, {expires_at}, {token}, {incarnation})
ON CONFLICT (shard_key, key) DO NOTHING
RETURNING 1, 0, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation

-- ShardColumnStatements.ClaimedWithoutRow: false

-- ShardColumnStatements.Takeover
UPDATE "app"."idem_keys" SET request_hash = {request_hash}, created_at = {created_at}, expires_at = {expires_at},
	token = {token}, incarnation = {incarnation}, status = NULL, header = NULL, body = NULL, checksum = NULL
WHERE shard_key = {shard} AND key = {key} AND expires_at <= {created_at}

-- ShardColumnStatements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key}

-- ShardColumnStatements.Complete
UPDATE "app"."idem_keys" SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE shard_key = {shard} AND key = {key} AND token = {token}

-- ShardColumnStatements.Abandon
DELETE FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key} AND token = {token}

-- ShardColumnStatements.Purge
DELETE FROM "app"."idem_keys" WHERE (shard_key, key) IN (SELECT shard_key, key FROM "app"."idem_keys" WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})

-- ShardColumnStatements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM "app"."idem_keys"

-- ShardColumnStatements.CountExpired
SELECT COUNT(*) FROM "app"."idem_keys" WHERE expires_at <= {now}

-- ShardColumnStatements.Run.Start
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Progress
SELECT phase, lease_until, token, created_at, (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ShardColumnStatements.Run.Takeover
UPDATE "app"."idem_keys" SET token = {token}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})

-- ShardColumnStatements.Run.Advance
UPDATE "app"."idem_keys" SET token = {token}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL

-- ShardColumnStatements.Run.Mark
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Renew
UPDATE "app"."idem_keys" SET lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Finish
UPDATE "app"."idem_keys" SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Release
UPDATE "app"."idem_keys" SET lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) WHERE shard_key = {shard} AND key = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- ShardColumnStatements.Run.Unfinished
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Resumable
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Backoff
UPDATE "app"."idem_keys" SET resume_backoff = min({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = max(lease_until, (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})) WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ===== a shard column of kind uuid

-- ShardColumnSchema[0]
CREATE TABLE IF NOT EXISTS "app"."idem_keys" (
	shard_key    TEXT NOT NULL,
	key          BLOB    NOT NULL,
	request_hash BLOB    NOT NULL,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	status       INTEGER,
	header       BLOB,
	body         BLOB,
	checksum     BLOB,
	token        INTEGER NOT NULL DEFAULT 0,
	phase        TEXT,
	lease_until  INTEGER,
	resume_backoff INTEGER,
	incarnation  INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (shard_key, key)
)

-- ShardColumnSchema[1]
CREATE INDEX IF NOT EXISTS "app"."idem_keys_expires_at" ON "idem_keys" (expires_at)

-- ShardColumnCheck (type TEXT)
SELECT count(*), count(*) FILTER (WHERE CASE WHEN instr(upper(type), 'INT') > 0 THEN 'INTEGER' WHEN instr(upper(type), 'CHAR') > 0 OR instr(upper(type), 'CLOB') > 0 OR instr(upper(type), 'TEXT') > 0 THEN 'TEXT' WHEN instr(upper(type), 'BLOB') > 0 OR trim(upper(type)) = '' THEN 'BLOB' ELSE 'NUMERIC' END = 'TEXT') FROM pragma_table_info('idem_keys', 'app') WHERE name = 'shard_key'

-- ShardColumnStatements.Claim
INSERT INTO "app"."idem_keys" (shard_key, key, request_hash, created_at, expires_at, token, incarnation)
VALUES ({shard}, {key}, {request_hash}, {created_at}, {expires_at}, {token}, {incarnation})
ON CONFLICT (shard_key, key) DO NOTHING
RETURNING 1, 0, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation

-- ShardColumnStatements.ClaimedWithoutRow: false

-- ShardColumnStatements.Takeover
UPDATE "app"."idem_keys" SET request_hash = {request_hash}, created_at = {created_at}, expires_at = {expires_at},
	token = {token}, incarnation = {incarnation}, status = NULL, header = NULL, body = NULL, checksum = NULL
WHERE shard_key = {shard} AND key = {key} AND expires_at <= {created_at}

-- ShardColumnStatements.Lookup
SELECT request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key}

-- ShardColumnStatements.Complete
UPDATE "app"."idem_keys" SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE shard_key = {shard} AND key = {key} AND token = {token}

-- ShardColumnStatements.Abandon
DELETE FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key} AND token = {token}

-- ShardColumnStatements.Purge
DELETE FROM "app"."idem_keys" WHERE (shard_key, key) IN (SELECT shard_key, key FROM "app"."idem_keys" WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})

-- ShardColumnStatements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM "app"."idem_keys"

-- ShardColumnStatements.CountExpired
SELECT COUNT(*) FROM "app"."idem_keys" WHERE expires_at <= {now}

-- ShardColumnStatements.Run.Start
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Progress
SELECT phase, lease_until, token, created_at, (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ShardColumnStatements.Run.Takeover
UPDATE "app"."idem_keys" SET token = {token}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})

-- ShardColumnStatements.Run.Advance
UPDATE "app"."idem_keys" SET token = {token}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL

-- ShardColumnStatements.Run.Mark
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Renew
UPDATE "app"."idem_keys" SET lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Finish
UPDATE "app"."idem_keys" SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Release
UPDATE "app"."idem_keys" SET lease_until = (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}) WHERE shard_key = {shard} AND key = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- ShardColumnStatements.Run.Unfinished
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Resumable
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Backoff
UPDATE "app"."idem_keys" SET resume_backoff = min({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = max(lease_until, (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})) WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL
