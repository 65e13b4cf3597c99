-- The postgres dialect on table app.idem_keys, lock timeout 2.5s. Written by
-- go test ./dialect -run TestStatementsGolden -update

-- Capabilities: {OneWriter:false ConflictAtCommit:false MinLockWait:0s ShardedByKey:false MaxPurgeBatch:1000 ReadsUncommitted:false KeepsIsolation:false}

-- Schema[0]
CREATE TABLE IF NOT EXISTS "app"."idem_keys" (
	key          bytea   PRIMARY KEY,
	request_hash bytea   NOT NULL,
	created_at   bigint  NOT NULL,
	expires_at   bigint  NOT NULL,
	status       integer,
	header       bytea,
	body         bytea,
	checksum     bytea,
	token        bigint  NOT NULL DEFAULT 0,
	phase        text,
	lease_until  bigint,
	resume_backoff bigint,
	incarnation  bigint  NOT NULL DEFAULT 0
)

-- Schema[1]
CREATE INDEX IF NOT EXISTS "idem_keys_expires_at" ON "app"."idem_keys" (expires_at)

-- Upgrades[0].Check
SELECT count(*) FROM pg_attribute WHERE attrelid = '"app"."idem_keys"'::regclass AND attname = 'token' AND NOT attisdropped

-- Upgrades[0].Apply
ALTER TABLE "app"."idem_keys" ADD COLUMN IF NOT EXISTS token bigint NOT NULL DEFAULT 0

-- Upgrades[1].Check
SELECT count(*) FROM pg_attribute WHERE attrelid = '"app"."idem_keys"'::regclass AND attname = 'phase' AND NOT attisdropped

-- Upgrades[1].Apply
ALTER TABLE "app"."idem_keys" ADD COLUMN IF NOT EXISTS phase text

-- Upgrades[2].Check
SELECT count(*) FROM pg_attribute WHERE attrelid = '"app"."idem_keys"'::regclass AND attname = 'lease_until' AND NOT attisdropped

-- Upgrades[2].Apply
ALTER TABLE "app"."idem_keys" ADD COLUMN IF NOT EXISTS lease_until bigint

-- Upgrades[3].Check
SELECT count(*) FROM pg_attribute WHERE attrelid = '"app"."idem_keys"'::regclass AND attname = 'resume_backoff' AND NOT attisdropped

-- Upgrades[3].Apply
ALTER TABLE "app"."idem_keys" ADD COLUMN IF NOT EXISTS resume_backoff bigint

-- Upgrades[4].Check
SELECT count(*) FROM pg_attribute WHERE attrelid = '"app"."idem_keys"'::regclass AND attname = 'incarnation' AND NOT attisdropped

-- Upgrades[4].Apply
ALTER TABLE "app"."idem_keys" ADD COLUMN IF NOT EXISTS incarnation bigint NOT NULL DEFAULT 0

-- Statements.Claim
INSERT INTO "app"."idem_keys" (key, request_hash, created_at, expires_at, token, incarnation)
SELECT {key}::bytea, {request_hash}::bytea, {created_at}::bigint, {expires_at}::bigint, {token}::bigint, {incarnation}::bigint
WHERE pg_try_advisory_xact_lock(({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))
ON CONFLICT (key) DO NOTHING
RETURNING true, false, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation

-- Statements.ClaimedWithoutRow: false

-- Statements.ClaimLost
SELECT false, false, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM "app"."idem_keys" WHERE key = {key}

-- Statements.ClaimHeld
SELECT NOT pg_try_advisory_xact_lock(({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))

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

-- Statements.PurgeSelect
WITH batch AS MATERIALIZED (SELECT key FROM "app"."idem_keys" WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})
SELECT key FROM batch WHERE pg_try_advisory_xact_lock((('x' || encode(substr(sha256(key), 1, 8), 'hex'))::bit(64)::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))

-- Statements.PurgeDelete
DELETE FROM "app"."idem_keys" WHERE key IN ({keys}) AND expires_at <= {now}

-- Statements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM "app"."idem_keys"

-- Statements.CountExpired
SELECT COUNT(*) FROM "app"."idem_keys" WHERE expires_at <= {now}

-- Statements.Run.Lock
SELECT pg_advisory_xact_lock({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32))

-- Statements.Run.TryLock
SELECT pg_try_advisory_xact_lock({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32))

-- Statements.Run.Start
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE key = {key} AND token = {token} AND status IS NULL

-- Statements.Run.Progress
SELECT phase, lease_until, token, created_at, ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys" WHERE key = {key} AND status IS NULL AND phase IS NOT NULL

-- Statements.Run.Takeover
UPDATE "app"."idem_keys" SET token = {token}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE key = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})

-- Statements.Run.Advance
UPDATE "app"."idem_keys" SET token = {token}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE key = {key} AND token = {prev_token} AND status IS NULL

-- Statements.Run.Mark
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE key = {key} AND token = {token} AND status IS NULL

-- Statements.Run.Renew
UPDATE "app"."idem_keys" SET lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE key = {key} AND token = {token} AND status IS NULL

-- Statements.Run.Finish
UPDATE "app"."idem_keys" SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE key = {key} AND token = {token} AND status IS NULL

-- Statements.Run.Release
UPDATE "app"."idem_keys" SET lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) WHERE key = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- Statements.Run.Unfinished
SELECT key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- Statements.Run.Resumable
SELECT key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- Statements.Run.Backoff
UPDATE "app"."idem_keys" SET resume_backoff = LEAST({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = GREATEST(lease_until, ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})) WHERE key = {key} AND status IS NULL AND phase IS NOT NULL

-- ===== a shard column of kind int64

-- ShardColumnSchema[0]
CREATE TABLE IF NOT EXISTS "app"."idem_keys" (
	shard_key    bigint NOT NULL,
	key          bytea   NOT NULL,
	request_hash bytea   NOT NULL,
	created_at   bigint  NOT NULL,
	expires_at   bigint  NOT NULL,
	status       integer,
	header       bytea,
	body         bytea,
	checksum     bytea,
	token        bigint  NOT NULL DEFAULT 0,
	phase        text,
	lease_until  bigint,
	resume_backoff bigint,
	incarnation  bigint  NOT NULL DEFAULT 0,
	PRIMARY KEY (shard_key, key)
)

-- ShardColumnSchema[1]
CREATE INDEX IF NOT EXISTS "idem_keys_expires_at" ON "app"."idem_keys" (expires_at)

-- ShardColumnCheck (type bigint)
SELECT count(*), count(*) FILTER (WHERE atttypid = 'bigint'::regtype) FROM pg_attribute WHERE attrelid = '"app"."idem_keys"'::regclass AND attname = 'shard_key' AND NOT attisdropped

-- ShardColumnStatements.Claim
INSERT INTO "app"."idem_keys" (shard_key, key, request_hash, created_at, expires_at, token, incarnation)
SELECT {shard}::bigint, {key}::bytea, {request_hash}::bytea, {created_at}::bigint, {expires_at}::bigint, {token}::bigint, {incarnation}::bigint
WHERE pg_try_advisory_xact_lock(({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))
ON CONFLICT (shard_key, key) DO NOTHING
RETURNING true, false, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation

-- ShardColumnStatements.ClaimedWithoutRow: false

-- ShardColumnStatements.ClaimLost
SELECT false, false, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key}

-- ShardColumnStatements.ClaimHeld
SELECT NOT pg_try_advisory_xact_lock(({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))

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

-- ShardColumnStatements.PurgeSelect
WITH batch AS MATERIALIZED (SELECT shard_key, key FROM "app"."idem_keys" WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})
SELECT shard_key, key FROM batch WHERE pg_try_advisory_xact_lock((('x' || encode(substr(sha256(int4send(octet_length(int8send(shard_key))) || int8send(shard_key) || key), 1, 8), 'hex'))::bit(64)::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))

-- ShardColumnStatements.PurgeDelete
DELETE FROM "app"."idem_keys" WHERE (shard_key, key) IN ({keys}) AND expires_at <= {now}

-- ShardColumnStatements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM "app"."idem_keys"

-- ShardColumnStatements.CountExpired
SELECT COUNT(*) FROM "app"."idem_keys" WHERE expires_at <= {now}

-- ShardColumnStatements.Run.Lock
SELECT pg_advisory_xact_lock({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32))

-- ShardColumnStatements.Run.TryLock
SELECT pg_try_advisory_xact_lock({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32))

-- ShardColumnStatements.Run.Start
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Progress
SELECT phase, lease_until, token, created_at, ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ShardColumnStatements.Run.Takeover
UPDATE "app"."idem_keys" SET token = {token}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})

-- ShardColumnStatements.Run.Advance
UPDATE "app"."idem_keys" SET token = {token}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL

-- ShardColumnStatements.Run.Mark
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Renew
UPDATE "app"."idem_keys" SET lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Finish
UPDATE "app"."idem_keys" SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Release
UPDATE "app"."idem_keys" SET lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) WHERE shard_key = {shard} AND key = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- ShardColumnStatements.Run.Unfinished
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Resumable
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Backoff
UPDATE "app"."idem_keys" SET resume_backoff = LEAST({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = GREATEST(lease_until, ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})) WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ===== a shard column of kind text(64)

-- ShardColumnSchema[0]
CREATE TABLE IF NOT EXISTS "app"."idem_keys" (
	shard_key    text NOT NULL,
	key          bytea   NOT NULL,
	request_hash bytea   NOT NULL,
	created_at   bigint  NOT NULL,
	expires_at   bigint  NOT NULL,
	status       integer,
	header       bytea,
	body         bytea,
	checksum     bytea,
	token        bigint  NOT NULL DEFAULT 0,
	phase        text,
	lease_until  bigint,
	resume_backoff bigint,
	incarnation  bigint  NOT NULL DEFAULT 0,
	PRIMARY KEY (shard_key, key)
)

-- ShardColumnSchema[1]
CREATE INDEX IF NOT EXISTS "idem_keys_expires_at" ON "app"."idem_keys" (expires_at)

-- ShardColumnCheck (type text)
SELECT count(*), count(*) FILTER (WHERE atttypid = 'text'::regtype) FROM pg_attribute WHERE attrelid = '"app"."idem_keys"'::regclass AND attname = 'shard_key' AND NOT attisdropped

-- ShardColumnStatements.Claim
INSERT INTO "app"."idem_keys" (shard_key, key, request_hash, created_at, expires_at, token, incarnation)
SELECT {shard}::text, {key}::bytea, {request_hash}::bytea, {created_at}::bigint, {expires_at}::bigint, {token}::bigint, {incarnation}::bigint
WHERE pg_try_advisory_xact_lock(({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))
ON CONFLICT (shard_key, key) DO NOTHING
RETURNING true, false, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation

-- ShardColumnStatements.ClaimedWithoutRow: false

-- ShardColumnStatements.ClaimLost
SELECT false, false, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key}

-- ShardColumnStatements.ClaimHeld
SELECT NOT pg_try_advisory_xact_lock(({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))

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

-- ShardColumnStatements.PurgeSelect
WITH batch AS MATERIALIZED (SELECT shard_key, key FROM "app"."idem_keys" WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})
SELECT shard_key, key FROM batch WHERE pg_try_advisory_xact_lock((('x' || encode(substr(sha256(int4send(octet_length(convert_to(shard_key, 'UTF8'))) || convert_to(shard_key, 'UTF8') || key), 1, 8), 'hex'))::bit(64)::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))

-- ShardColumnStatements.PurgeDelete
DELETE FROM "app"."idem_keys" WHERE (shard_key, key) IN ({keys}) AND expires_at <= {now}

-- ShardColumnStatements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM "app"."idem_keys"

-- ShardColumnStatements.CountExpired
SELECT COUNT(*) FROM "app"."idem_keys" WHERE expires_at <= {now}

-- ShardColumnStatements.Run.Lock
SELECT pg_advisory_xact_lock({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32))

-- ShardColumnStatements.Run.TryLock
SELECT pg_try_advisory_xact_lock({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32))

-- ShardColumnStatements.Run.Start
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Progress
SELECT phase, lease_until, token, created_at, ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ShardColumnStatements.Run.Takeover
UPDATE "app"."idem_keys" SET token = {token}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})

-- ShardColumnStatements.Run.Advance
UPDATE "app"."idem_keys" SET token = {token}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL

-- ShardColumnStatements.Run.Mark
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Renew
UPDATE "app"."idem_keys" SET lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Finish
UPDATE "app"."idem_keys" SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Release
UPDATE "app"."idem_keys" SET lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) WHERE shard_key = {shard} AND key = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- ShardColumnStatements.Run.Unfinished
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Resumable
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Backoff
UPDATE "app"."idem_keys" SET resume_backoff = LEAST({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = GREATEST(lease_until, ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})) WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ===== a shard column of kind bytes(16)

-- ShardColumnSchema[0]
CREATE TABLE IF NOT EXISTS "app"."idem_keys" (
	shard_key    bytea NOT NULL,
	key          bytea   NOT NULL,
	request_hash bytea   NOT NULL,
	created_at   bigint  NOT NULL,
	expires_at   bigint  NOT NULL,
	status       integer,
	header       bytea,
	body         bytea,
	checksum     bytea,
	token        bigint  NOT NULL DEFAULT 0,
	phase        text,
	lease_until  bigint,
	resume_backoff bigint,
	incarnation  bigint  NOT NULL DEFAULT 0,
	PRIMARY KEY (shard_key, key)
)

-- ShardColumnSchema[1]
CREATE INDEX IF NOT EXISTS "idem_keys_expires_at" ON "app"."idem_keys" (expires_at)

-- ShardColumnCheck (type bytea)
SELECT count(*), count(*) FILTER (WHERE atttypid = 'bytea'::regtype) FROM pg_attribute WHERE attrelid = '"app"."idem_keys"'::regclass AND attname = 'shard_key' AND NOT attisdropped

-- ShardColumnStatements.Claim
INSERT INTO "app"."idem_keys" (shard_key, key, request_hash, created_at, expires_at, token, incarnation)
SELECT {shard}::bytea, {key}::bytea, {request_hash}::bytea, {created_at}::bigint, {expires_at}::bigint, {token}::bigint, {incarnation}::bigint
WHERE pg_try_advisory_xact_lock(({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))
ON CONFLICT (shard_key, key) DO NOTHING
RETURNING true, false, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation

-- ShardColumnStatements.ClaimedWithoutRow: false

-- ShardColumnStatements.ClaimLost
SELECT false, false, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key}

-- ShardColumnStatements.ClaimHeld
SELECT NOT pg_try_advisory_xact_lock(({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))

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

-- ShardColumnStatements.PurgeSelect
WITH batch AS MATERIALIZED (SELECT shard_key, key FROM "app"."idem_keys" WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})
SELECT shard_key, key FROM batch WHERE pg_try_advisory_xact_lock((('x' || encode(substr(sha256(int4send(octet_length(shard_key)) || shard_key || key), 1, 8), 'hex'))::bit(64)::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))

-- ShardColumnStatements.PurgeDelete
DELETE FROM "app"."idem_keys" WHERE (shard_key, key) IN ({keys}) AND expires_at <= {now}

-- ShardColumnStatements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM "app"."idem_keys"

-- ShardColumnStatements.CountExpired
SELECT COUNT(*) FROM "app"."idem_keys" WHERE expires_at <= {now}

-- ShardColumnStatements.Run.Lock
SELECT pg_advisory_xact_lock({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32))

-- ShardColumnStatements.Run.TryLock
SELECT pg_try_advisory_xact_lock({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32))

-- ShardColumnStatements.Run.Start
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Progress
SELECT phase, lease_until, token, created_at, ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ShardColumnStatements.Run.Takeover
UPDATE "app"."idem_keys" SET token = {token}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})

-- ShardColumnStatements.Run.Advance
UPDATE "app"."idem_keys" SET token = {token}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL

-- ShardColumnStatements.Run.Mark
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Renew
UPDATE "app"."idem_keys" SET lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Finish
UPDATE "app"."idem_keys" SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Release
UPDATE "app"."idem_keys" SET lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) WHERE shard_key = {shard} AND key = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- ShardColumnStatements.Run.Unfinished
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Resumable
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Backoff
UPDATE "app"."idem_keys" SET resume_backoff = LEAST({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = GREATEST(lease_until, ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})) WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ===== a shard column of kind uuid

-- ShardColumnSchema[0]
CREATE TABLE IF NOT EXISTS "app"."idem_keys" (
	shard_key    uuid NOT NULL,
	key          bytea   NOT NULL,
	request_hash bytea   NOT NULL,
	created_at   bigint  NOT NULL,
	expires_at   bigint  NOT NULL,
	status       integer,
	header       bytea,
	body         bytea,
	checksum     bytea,
	token        bigint  NOT NULL DEFAULT 0,
	phase        text,
	lease_until  bigint,
	resume_backoff bigint,
	incarnation  bigint  NOT NULL DEFAULT 0,
	PRIMARY KEY (shard_key, key)
)

-- ShardColumnSchema[1]
CREATE INDEX IF NOT EXISTS "idem_keys_expires_at" ON "app"."idem_keys" (expires_at)

-- ShardColumnCheck (type uuid)
SELECT count(*), count(*) FILTER (WHERE atttypid = 'uuid'::regtype) FROM pg_attribute WHERE attrelid = '"app"."idem_keys"'::regclass AND attname = 'shard_key' AND NOT attisdropped

-- ShardColumnStatements.Claim
INSERT INTO "app"."idem_keys" (shard_key, key, request_hash, created_at, expires_at, token, incarnation)
SELECT {shard}::uuid, {key}::bytea, {request_hash}::bytea, {created_at}::bigint, {expires_at}::bigint, {token}::bigint, {incarnation}::bigint
WHERE pg_try_advisory_xact_lock(({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))
ON CONFLICT (shard_key, key) DO NOTHING
RETURNING true, false, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation

-- ShardColumnStatements.ClaimedWithoutRow: false

-- ShardColumnStatements.ClaimLost
SELECT false, false, request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key}

-- ShardColumnStatements.ClaimHeld
SELECT NOT pg_try_advisory_xact_lock(({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))

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

-- ShardColumnStatements.PurgeSelect
WITH batch AS MATERIALIZED (SELECT shard_key, key FROM "app"."idem_keys" WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})
SELECT shard_key, key FROM batch WHERE pg_try_advisory_xact_lock((('x' || encode(substr(sha256(int4send(octet_length(uuid_send(shard_key))) || uuid_send(shard_key) || key), 1, 8), 'hex'))::bit(64)::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32)))

-- ShardColumnStatements.PurgeDelete
DELETE FROM "app"."idem_keys" WHERE (shard_key, key) IN ({keys}) AND expires_at <= {now}

-- ShardColumnStatements.Stats
SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM "app"."idem_keys"

-- ShardColumnStatements.CountExpired
SELECT COUNT(*) FROM "app"."idem_keys" WHERE expires_at <= {now}

-- ShardColumnStatements.Run.Lock
SELECT pg_advisory_xact_lock({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32))

-- ShardColumnStatements.Run.TryLock
SELECT pg_try_advisory_xact_lock({lock_id}::bigint # (hashtext((pg_identify_object('pg_class'::regclass, '"app"."idem_keys"'::regclass, 0)).identity)::bigint << 32))

-- ShardColumnStatements.Run.Start
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Progress
SELECT phase, lease_until, token, created_at, ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys" WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL

-- ShardColumnStatements.Run.Takeover
UPDATE "app"."idem_keys" SET token = {token}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})

-- ShardColumnStatements.Run.Advance
UPDATE "app"."idem_keys" SET token = {token}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {prev_token} AND status IS NULL

-- ShardColumnStatements.Run.Mark
UPDATE "app"."idem_keys" SET phase = {phase}, lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Renew
UPDATE "app"."idem_keys" SET lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) + {lease} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Finish
UPDATE "app"."idem_keys" SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE shard_key = {shard} AND key = {key} AND token = {token} AND status IS NULL

-- ShardColumnStatements.Run.Release
UPDATE "app"."idem_keys" SET lease_until = ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}) WHERE shard_key = {shard} AND key = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL

-- ShardColumnStatements.Run.Unfinished
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Resumable
SELECT shard_key, key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset}), incarnation FROM "app"."idem_keys"
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at} AND lease_until + COALESCE(resume_backoff, 0) <= ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})
ORDER BY created_at LIMIT {limit}

-- ShardColumnStatements.Run.Backoff
UPDATE "app"."idem_keys" SET resume_backoff = LEAST({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = GREATEST(lease_until, ((extract(epoch from statement_timestamp()) * 1000000)::bigint + {clock_offset})) WHERE shard_key = {shard} AND key = {key} AND status IS NULL AND phase IS NOT NULL
