package dialect

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/idemgo/idem/driver"
)

// Postgres returns the dialect of PostgreSQL (version 12 or later), for the
// lib/pq driver and for pgx through its database/sql driver.
//
// Services take it through idem.Postgres, whose documentation says what they
// need to know of the database: its versions, locks and settings.
func Postgres() Dialect { return postgres{} }

type postgres struct{}

var _ Dialect = postgres{}

func (postgres) Name() string { return "postgres" }

func (postgres) Placeholder(n int) string { return NumberedPlaceholder("$", n) }

func (postgres) Schema(table string) []string { return postgresSchema(table, "") }

// ShardColumnSchema is Schema with shard_key of kind's type
// (postgresShardType).
func (postgres) ShardColumnSchema(table string, kind ShardKind) []string {
	return postgresSchema(table, postgresShardType(kind))
}

// postgresShardType is the type of a shard column of kind: one that holds
// every value of the kind exactly and compares it byte for byte, and that
// a parameter can be declared of without a bound that could cut a value.
// A text column's bound is the Store's, which checks each value's bytes;
// text compares by the database's collation, which PostgreSQL requires to
// be deterministic, so that only equal bytes are equal.
func postgresShardType(kind ShardKind) string {
	switch kind.Type {
	case ShardInt64:
		return "bigint"
	case ShardText:
		return "text"
	case ShardBytes:
		return "bytea"
	case ShardUUID:
		return "uuid"
	}
	return ""
}

// ShardColumnCheck counts the table's shard_key columns, and those of
// kind's type, in pg_attribute.
func (postgres) ShardColumnCheck(table string, kind ShardKind) (string, string) {
	typ := postgresShardType(kind)
	return `SELECT count(*), count(*) FILTER (WHERE atttypid = '` + typ + `'::regtype) FROM pg_attribute WHERE attrelid = '` +
		QuoteTable(table, '"') + `'::regclass AND attname = 'shard_key' AND NOT attisdropped`, typ
}

// postgresSchema is the table, with shard_key of type shard unless shard
// is "".
func postgresSchema(table, shard string) []string {
	t := QuoteTable(table, '"')
	_, bare := splitTable(table)
	key, pk := "key          bytea   PRIMARY KEY,", ""
	if shard != "" {
		key = "shard_key    " + shard + " NOT NULL,\n\tkey          bytea   NOT NULL,"
		pk = ",\n\tPRIMARY KEY (shard_key, key)"
	}
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + t + ` (
	` + key + `
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
	incarnation  bigint  NOT NULL DEFAULT 0` + pk + `
)`,
		`CREATE INDEX IF NOT EXISTS "` + bare + `_expires_at" ON ` + t + ` (expires_at)`,
	}
}

// Upgrades adds the columns that tables made by earlier versions lack: the
// token that guards Complete and Abandon, then the phase and lease of
// multi-step requests, then Resume's back-off, then the record's
// incarnation (0 in the records already there). Each goes at the end of
// the table, so they come in the order of a new table's columns.
func (postgres) Upgrades(table string) []Upgrade {
	t := QuoteTable(table, '"')
	column := func(name, def string) Upgrade {
		return Upgrade{
			Check: `SELECT count(*) FROM pg_attribute WHERE attrelid = '` + t + `'::regclass AND attname = '` + name + `' AND NOT attisdropped`,
			Apply: `ALTER TABLE ` + t + ` ADD COLUMN IF NOT EXISTS ` + name + ` ` + def,
		}
	}
	return []Upgrade{
		column("token", "bigint NOT NULL DEFAULT 0"),
		column("phase", "text"),
		column("lease_until", "bigint"),
		column("resume_backoff", "bigint"),
		column("incarnation", "bigint NOT NULL DEFAULT 0"),
	}
}

// SQLSTATEs of a DDL statement whose object another transaction created
// under it.
const (
	pgUniqueViolation = "23505"
	pgDuplicateColumn = "42701"
	pgDuplicateObject = "42710"
	pgDuplicateTable  = "42P07"
)

// pgExists reports whether the SQLSTATE state says that the object of a
// statement of Schema or Upgrades was created by a concurrent transaction
// (see ErrorExists). CREATE ... IF NOT EXISTS looks for the name before it takes
// any lock, so two statements may both go on to create it; the second then
// waits for the first's rows in pg_type or pg_class and fails with a unique
// violation on that catalog's index once the first commits, or, if the
// first had committed already, says that the type or relation exists.
// Migrate sends no statement that could violate a unique index of data,
// and the Store reads ErrorExists from no other statement.
func pgExists(state string) bool {
	switch state {
	case pgUniqueViolation, pgDuplicateColumn, pgDuplicateObject, pgDuplicateTable:
		return true
	}
	return false
}

func (postgres) Statements(table string, _ time.Duration) Statements {
	return postgresStatements(table, keying{k: "key"})
}

// ShardColumnStatements is Statements for a table with shard_key of kind,
// whose locks are the pair's (ShardKind.LockBytes).
func (postgres) ShardColumnStatements(table string, kind ShardKind, _ time.Duration) Statements {
	return postgresStatements(table, keying{k: "key", shard: postgresShardType(kind), shardLock: postgresShardLock(kind)})
}

// postgresStatements is the statements on table, whose records kk names.
func postgresStatements(table string, kk keying) Statements {
	t := QuoteTable(table, '"')
	lock := postgresLock(t)
	r := strings.NewReplacer(append(kk.replacer(), "{T}", t, "{record}", record, "{lock}", lock("{lock_id}::bigint"),
		"{KCAST}", kk.values("::bytea"))...)
	return Statements{
		// The claim is a plain INSERT behind a one-time filter, which
		// the server plans as cheaply as the INSERT alone: a CTE that
		// also read the record when it lost took nearly twice as long
		// where the driver has every statement planned anew (lib/pq's
		// default; docs/performance.md). When the lock is taken, no
		// other claimer holds the key, so the insert cannot wait on one.
		// The filter reads no column, so Citus evaluates it on the
		// coordinator, as it does every such function of a write.
		Claim: r.Replace(`INSERT INTO {T} ({KCOLS}, request_hash, created_at, expires_at, token, incarnation)
SELECT {KCAST}, {request_hash}::bytea, {created_at}::bigint, {expires_at}::bigint, {token}::bigint, {incarnation}::bigint
WHERE pg_try_advisory_xact_lock({lock})
ON CONFLICT ({KCOLS}) DO NOTHING
RETURNING true, false, {record}`),
		// When the claim returned nothing, the key has a record or the
		// lock was held by another transaction. ClaimLost reads the
		// record alone: Citus runs a read of a distributed table, with
		// its functions, on the worker that holds the row, where a lock
		// would not meet the claim's. A live record answers the request;
		// otherwise ClaimHeld asks for the lock (a lock this
		// transaction holds is granted again) in a statement that reads
		// no table, which runs where the claim's lock was taken.
		ClaimLost: r.Replace(`SELECT false, false, {record} FROM {T} WHERE {MATCH}`),
		ClaimHeld: r.Replace(`SELECT NOT pg_try_advisory_xact_lock({lock})`),
		Takeover:  r.Replace(takeoverTemplate(kk)),
		Lookup:    r.Replace(`SELECT {record} FROM {T} WHERE {MATCH}`),
		Complete:  r.Replace(`UPDATE {T} SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE {MATCH} AND token = {token}`),
		Abandon:   r.Replace(`DELETE FROM {T} WHERE {MATCH} AND token = {token}`),
		// A batch skips the records whose key a claim holds, by the
		// claim's own lock, which it takes for the others until they are
		// deleted: a claim that takes an expired record over holds it
		// before it touches the row, so the delete never waits for one.
		// Row locks would do on PostgreSQL alone (FOR UPDATE SKIP LOCKED),
		// but Citus refuses them in a read of many shards. The
		// candidates are chosen first, in a subquery of their own, so
		// that the filter locks no key beyond the batch; Citus runs that
		// subquery on the workers and the filter on the coordinator,
		// where the claims take their locks. The key's lock number is
		// derived in SQL as the Store derives {lock_id} (lockID).
		PurgeSelect: r.Replace(`WITH batch AS MATERIALIZED (SELECT {KCOLS} FROM {T} WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})
SELECT {KCOLS} FROM batch WHERE pg_try_advisory_xact_lock(` + lock(postgresKeyLock(kk)) + `)`),
		PurgeDelete:  r.Replace(`DELETE FROM {T} WHERE ` + kk.in("") + ` AND expires_at <= {now}`),
		Stats:        r.Replace(statsTemplate),
		CountExpired: r.Replace(countExpiredTemplate),
		Run:          postgresRun(t, kk),
	}
}

// postgresMaxPurgeBatch bounds a purge's batch on PostgreSQL: the batch
// takes each key's advisory lock until it commits, one entry each of the
// server's shared lock table, which has room for max_locks_per_transaction
// (64 by default) for each connection the server allows, shared by every
// session (TestPurgeBatchLargerThanLockTable).
const postgresMaxPurgeBatch = 1000

// Capabilities bounds a purge's batch, which takes a lock of the shared
// lock table for each of its keys.
func (postgres) Capabilities() Capabilities {
	return Capabilities{MaxPurgeBatch: postgresMaxPurgeBatch}
}

// postgresLock returns the lock number of the quoted table t's key whose own
// number, as SQL, is id: id with a hash of the table's schema-qualified
// name in its upper half, so that every spelling of one table ("keys",
// "public.keys", under any search_path) takes the same lock. The name is
// the one the statement's own reference resolves to, and the same on every
// node of a Citus cluster, where each node's copy of the table has an OID
// of its own.
func postgresLock(t string) func(id string) string {
	table := `(hashtext((pg_identify_object('pg_class'::regclass, '` + t + `'::regclass, 0)).identity)::bigint << 32)`
	return func(id string) string { return `(` + id + ` # ` + table + `)` }
}

// postgresKeyLock is the {lock_id} of a record in SQL: the first 8 bytes
// of the SHA-256 of its key, big-endian, as a signed number; in a table
// with a shard column, of the bytes of ShardKind.LockBytes, which the
// shard value's own expression (postgresShardLock) writes before the key.
func postgresKeyLock(kk keying) string {
	b := "key"
	if kk.shard != "" {
		b = `int4send(octet_length(` + kk.shardLock + `)) || ` + kk.shardLock + ` || key`
	}
	return `('x' || encode(substr(sha256(` + b + `), 1, 8), 'hex'))::bit(64)::bigint`
}

// postgresShardLock is the bytes of shard_key of kind as ShardKind.LockBytes
// writes them: a bigint's 8 bytes big-endian (int8send), a text's UTF-8
// whatever the database's encoding, a bytea's own, a uuid's 16.
func postgresShardLock(kind ShardKind) string {
	switch kind.Type {
	case ShardInt64:
		return "int8send(shard_key)"
	case ShardText:
		return "convert_to(shard_key, 'UTF8')"
	case ShardUUID:
		return "uuid_send(shard_key)"
	}
	return "shard_key"
}

// postgresClock is PostgreSQL's clock for leases, in microseconds since the
// Unix epoch: statement_timestamp(), since now() is the transaction's
// start. It is stable within a statement, so Citus evaluates it once, on
// the coordinator, in the writes of a distributed table, where it refuses
// a volatile function such as clock_timestamp().
const postgresClock = `(extract(epoch from statement_timestamp()) * 1000000)::bigint`

// postgresRun adds to the shared statements of multi-step requests the
// advisory lock of the claim, which a phase holds while it runs. Neither
// statement reads a table, so on Citus both run on the coordinator, as the
// claim's lock does.
func postgresRun(t string, kk keying) RunStatements {
	s := runTemplate(t, kk, postgresClock, "LEAST", "GREATEST")
	key := postgresLock(t)("{lock_id}::bigint")
	s.Lock = `SELECT pg_advisory_xact_lock` + key
	s.TryLock = `SELECT pg_try_advisory_xact_lock` + key
	return s
}

// PostgreSQL error codes (SQLSTATE) that a Store acts on.
const (
	pgSerializationFailure = "40001"
	pgDeadlockDetected     = "40P01"
	pgLockNotAvailable     = "55P03"
	pgUndefinedColumn      = "42703"
)

func (postgres) Classify(err error) ErrorKind {
	// Both lib/pq's *pq.Error and pgx's *pgconn.PgError have SQLState.
	var e interface{ SQLState() string }
	if !errors.As(err, &e) {
		return ErrorOther
	}
	state := e.SQLState()
	if pgExists(state) {
		return ErrorExists
	}
	switch state {
	case pgUndefinedColumn:
		return ErrorMissingColumn
	case pgSerializationFailure, pgDeadlockDetected, pgLockNotAvailable:
		// A lock_timeout that the caller set fires as 55P03, and, like
		// every error in PostgreSQL, aborts the whole transaction: the
		// claim never waits on a lock itself, so this was the caller's
		// own wait, and only a new transaction can go on.
		return ErrorRetry
	}
	return ErrorOther
}

// PostgreSQL error codes that Hint explains: a named prepared statement
// that the session has already, or has not, and a Bind that does not fit
// the session's unnamed statement.
const (
	pgDuplicatePreparedStatement = "42P05"
	pgInvalidStatementName       = "26000"
	pgProtocolViolation          = "08P01"
)

// Hint names the database family of an error that is not PostgreSQL's, and
// explains the errors of a driver's statements behind a pooler in
// transaction mode, which may give the server session to another client
// between two of the driver's round trips. idem's statements prepare no
// names of their own: a driver that prepares and caches them (pgx by
// default) meets a session where another client's driver prepared the
// same name (42P05), or one without the name it prepared in another
// session (26000); and a driver that sends a statement's Parse and its
// Bind in two round trips (lib/pq by default, outside a transaction) meets
// another client's unnamed statement (08P01, when the numbers of values
// differ) or none (26000). Only the driver can avoid it, with a setting
// the error cannot give, so the hint names both.
func (postgres) Hint(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		switch e.SQLState() {
		case pgDuplicatePreparedStatement, pgInvalidStatementName, pgProtocolViolation:
			return "the driver's statements met another client's session: behind a pooler in transaction mode, " +
				"such as PgBouncer, open pgx with default_query_exec_mode=exec and lib/pq with binary_parameters=yes, " +
				"as idem's docs/operations.md says"
		}
	}
	return wrongServer(err, "PostgreSQL")
}

// The catalog answers TableInspector's questions.
var _ TableInspector = postgres{}

// TableExists asks to_regclass, which finds the table as the Store's
// statements do: on the search_path unless the name has a schema.
func (postgres) TableExists(ctx context.Context, q driver.Tx, table string) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, []any{QuoteTable(table, '"')}, &ok)
	return ok, err
}

// TableSize is pg_total_relation_size: the table, its indexes and its
// TOAST table. A missing table measures 0.
func (postgres) TableSize(ctx context.Context, q driver.Tx, table string) (int64, string, error) {
	var size int64
	err := q.QueryRow(ctx, `SELECT COALESCE(pg_total_relation_size(to_regclass($1)), 0)`, []any{QuoteTable(table, '"')}, &size)
	return size, "table, indexes and TOAST (pg_total_relation_size)", err
}
