package dialect

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Postgres returns the dialect of PostgreSQL (version 12 or later), for the
// lib/pq driver and for pgx through its database/sql driver.
//
// The claim is one INSERT that takes a transaction-level advisory lock on
// the key (pg_try_advisory_xact_lock, numbered from a hash of table and key)
// without waiting, and only then inserts. A key held by another transaction
// therefore never blocks the statement, never aborts the caller's
// transaction and needs no savepoint and no lock_timeout: Do sees it busy
// and asks again, briefly, until the lock timeout passes. A new key costs
// that INSERT; a key that has a record costs one more statement, which
// reads it.
//
// Under REPEATABLE READ and SERIALIZABLE, a key claimed by a transaction that
// committed after the caller's snapshot was taken fails with SQLSTATE 40001,
// which Do returns as ErrRetry: the caller's transaction is aborted and must
// run again.
func Postgres() Dialect { return postgres{} }

type postgres struct{}

var _ Dialect = postgres{}

func (postgres) Name() string { return "postgres" }

func (postgres) Placeholder(n int) string { return NumberedPlaceholder("$", n) }

func (postgres) Schema(table string) []string {
	t := QuoteTable(table, '"')
	_, bare := splitTable(table)
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + t + ` (
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
	resume_backoff bigint
)`,
		`CREATE INDEX IF NOT EXISTS "` + bare + `_expires_at" ON ` + t + ` (expires_at)`,
	}
}

// Upgrades adds the columns that tables made by earlier versions lack: the
// token that guards Complete and Abandon, then the phase and lease of
// multi-step requests, then Resume's back-off. Each goes at the end of the table, so they come in
// the order of a new table's columns.
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
	t := QuoteTable(table, '"')
	r := strings.NewReplacer("{T}", t, "{record}", record,
		"{lock}", `{lock_id}::bigint # ('`+t+`'::regclass::oid::bigint << 32)`)
	return Statements{
		// The claim is a plain INSERT behind a one-time filter, which
		// the server plans as cheaply as the INSERT alone: a CTE that
		// also read the record when it lost took nearly twice as long
		// where the driver has every statement planned anew (lib/pq's
		// default; docs/performance.md). When the lock is taken, no
		// other claimer holds the key, so the insert cannot wait on one.
		// The lock number mixes the table's OID into the key's, so that
		// every spelling of one table ("keys", "public.keys") takes the
		// same lock.
		Claim: r.Replace(`INSERT INTO {T} (key, request_hash, created_at, expires_at, token)
SELECT {key}::bytea, {request_hash}::bytea, {created_at}::bigint, {expires_at}::bigint, {token}::bigint
WHERE pg_try_advisory_xact_lock({lock})
ON CONFLICT (key) DO NOTHING
RETURNING true, false, {record}`),
		// When the claim returned nothing, the lock was held by
		// another transaction or the key has a record: one row tells
		// which, asking for the lock again (a lock this transaction
		// holds is granted again). The join of one row evaluates the
		// function once.
		ClaimLost: r.Replace(`SELECT false, NOT pg_try_advisory_xact_lock({lock}),
	r.request_hash, r.status, r.header, r.body, r.checksum, r.created_at, r.expires_at, r.token
FROM (VALUES (1)) AS one LEFT JOIN {T} AS r ON r.key = {key}::bytea`),
		Takeover: r.Replace(takeoverTemplate("key")),
		Lookup:   r.Replace(`SELECT {record} FROM {T} WHERE key = {key}`),
		Complete: r.Replace(`UPDATE {T} SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE key = {key} AND token = {token}`),
		Abandon:  r.Replace(`DELETE FROM {T} WHERE key = {key} AND token = {token}`),
		// SKIP LOCKED leaves alone the records that a claim is taking
		// over, and the batch's transaction keeps the others locked
		// until they are deleted.
		PurgeSelect: r.Replace(`SELECT key FROM {T} WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit} FOR UPDATE SKIP LOCKED`),
		PurgeDelete: r.Replace(`DELETE FROM {T} WHERE key IN ({keys}) AND expires_at <= {now}`),
		Run:         postgresRun(t),
	}
}

// postgresClock is PostgreSQL's clock for leases, in microseconds since the
// Unix epoch: clock_timestamp(), since now() is the transaction's start.
const postgresClock = `(extract(epoch from clock_timestamp()) * 1000000)::bigint`

// postgresRun adds to the shared statements of multi-step requests the
// advisory lock of the claim, which a phase holds while it runs.
func postgresRun(t string) RunStatements {
	s := runTemplate(t, "key", postgresClock, "LEAST", "GREATEST")
	key := `({lock_id}::bigint # ('` + t + `'::regclass::oid::bigint << 32))`
	s.Lock = `SELECT pg_advisory_xact_lock` + key
	s.TryLock = `SELECT pg_try_advisory_xact_lock` + key
	return s
}

// PostgreSQL error codes (SQLSTATE) that a Store acts on.
const (
	pgSerializationFailure = "40001"
	pgDeadlockDetected     = "40P01"
	pgLockNotAvailable     = "55P03"
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
// that the session has already, or has not.
const (
	pgDuplicatePreparedStatement = "42P05"
	pgInvalidStatementName       = "26000"
)

// Hint names the database family of an error that is not PostgreSQL's, and
// explains the errors of a driver's prepared statements behind a pooler.
// idem's statements prepare no names of their own: a driver that prepares
// and caches them (pgx by default) meets, behind a pooler in transaction
// mode, a session where another client's driver prepared the same name
// (42P05), or one without the name it prepared in another session (26000).
// Only the driver can avoid it, with a setting the error cannot give,
// so the hint names it.
func (postgres) Hint(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		switch e.SQLState() {
		case pgDuplicatePreparedStatement, pgInvalidStatementName:
			return "the driver's prepared statements met another client's session: behind a pooler in transaction mode, " +
				"such as PgBouncer, open pgx with default_query_exec_mode=exec, as idem's docs/pgx.md says"
		}
	}
	return wrongServer(err, "PostgreSQL")
}

// The catalog answers TableInspector's questions.
var _ TableInspector = postgres{}

// TableExists asks to_regclass, which finds the table as the Store's
// statements do: on the search_path unless the name has a schema.
func (postgres) TableExists(ctx context.Context, q Querier, table string) (bool, error) {
	t := QuoteTable(table, '"')
	var ok bool
	err := q.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, t).Scan(&ok)
	return ok, err
}

// TableSize is pg_total_relation_size: the table, its indexes and its
// TOAST table. A missing table measures 0.
func (postgres) TableSize(ctx context.Context, q Querier, table string) (int64, string, error) {
	t := QuoteTable(table, '"')
	var size int64
	err := q.QueryRowContext(ctx, `SELECT COALESCE(pg_total_relation_size(to_regclass($1)), 0)`, t).Scan(&size)
	return size, "table, indexes and TOAST (pg_total_relation_size)", err
}
