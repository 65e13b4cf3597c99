// Package mattnsqlite is an idem dialect for SQLite through the cgo driver
// github.com/mattn/go-sqlite3, written by following docs/dialects.md. It is
// an example of a dialect outside package idem, and implements all of the
// contract: Do's statements, whose claim inserts with ON CONFLICT DO
// NOTHING and leaves expired records to a separate takeover statement; the
// statements of multi-step requests (Store.Run and Resume); the
// upgrades of tables that its first version made; and the meaning of
// SQLite's errors as this driver reports them.
//
// Open the database as the SQLite dialect asks, in this driver's words:
//
//	sql.Open("sqlite3", "file:app.db?_txlock=immediate&_busy_timeout=5000")
package mattnsqlite

import (
	"errors"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/idemgo/idem/dialect"
)

// Dialect returns the dialect.
func Dialect() dialect.Dialect { return sqliteMattn{} }

type sqliteMattn struct{}

var _ dialect.Dialect = sqliteMattn{}

func (sqliteMattn) Name() string { return "sqlite-mattn" }

// Placeholder numbers its markers, "?1", "?2", so a parameter used twice is
// bound once.
func (sqliteMattn) Placeholder(n int) string { return dialect.NumberedPlaceholder("?", n) }

// Capabilities says that SQLite runs one writing transaction at a time: a
// second writer waits at BEGIN (opened with _txlock=immediate), so a claim
// never meets a key that another transaction holds, and idemtest.TestDialect
// skips the properties that need two writers at once.
func (sqliteMattn) Capabilities() dialect.Capabilities {
	return dialect.Capabilities{OneWriter: true}
}

// quote quotes a table name that idem.WithTable accepted, each part of
// "schema.table" on its own, so that a name that is a keyword ("order")
// works too.
func quote(table string) string { return dialect.QuoteTable(table, '"') }

// Schema keeps keys and hashes as BLOBs, which SQLite compares byte for
// byte, and times as integers (microseconds). The index on expires_at lives
// in the table's schema: SQLite takes the schema from the index's name and
// wants the table after ON without one.
func (sqliteMattn) Schema(table string) []string {
	bare := table[strings.LastIndexByte(table, '.')+1:]
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + quote(table) + ` (
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
)`,
		`CREATE INDEX IF NOT EXISTS ` + quote(table+"_expires_at") + ` ON ` + quote(bare) + ` (expires_at)`,
	}
}

// Upgrades adds the columns of multi-step requests to a table that the
// first version of this dialect made, which had only Do's, and then the
// incarnation, which the records already there hold 0 in. SQLite has no
// ADD COLUMN IF NOT EXISTS: the check counts the column first.
func (sqliteMattn) Upgrades(table string) []dialect.Upgrade {
	schema, bare := "main", table
	if s, t, ok := strings.Cut(table, "."); ok {
		schema, bare = s, t
	}
	var ups []dialect.Upgrade
	for _, c := range []struct{ name, def string }{
		{"phase", "TEXT"}, {"lease_until", "INTEGER"}, {"resume_backoff", "INTEGER"},
		{"incarnation", "INTEGER NOT NULL DEFAULT 0"},
	} {
		ups = append(ups, dialect.Upgrade{
			Check: `SELECT count(*) FROM pragma_table_info('` + bare + `', '` + schema + `') WHERE name = '` + c.name + `'`,
			Apply: `ALTER TABLE ` + quote(table) + ` ADD COLUMN ` + c.name + ` ` + c.def,
		})
	}
	return ups
}

// record lists the record columns in the order that dialect.Statements
// gives, with the incarnation, which the claim writes.
const record = `request_hash, status, header, body, checksum, created_at, expires_at, token, incarnation`

func (sqliteMattn) Statements(table string, _ time.Duration) dialect.Statements {
	r := strings.NewReplacer("{T}", quote(table), "{record}", record)
	return dialect.Statements{
		// RETURNING yields a row only when this statement inserted; a
		// loser gets no row, and Do looks the record up. The claim
		// writes the new record's incarnation, and so does the
		// takeover of an expired one, which is a new request.
		Claim: r.Replace(`INSERT INTO {T} (key, request_hash, created_at, expires_at, token, incarnation)
VALUES ({key}, {request_hash}, {created_at}, {expires_at}, {token}, {incarnation})
ON CONFLICT (key) DO NOTHING
RETURNING 1, 0, {record}`),
		Takeover: r.Replace(`UPDATE {T} SET request_hash = {request_hash}, created_at = {created_at}, expires_at = {expires_at},
	token = {token}, incarnation = {incarnation}, status = NULL, header = NULL, body = NULL, checksum = NULL
WHERE key = {key} AND expires_at <= {created_at}`),
		Lookup: r.Replace(`SELECT {record} FROM {T} WHERE key = {key}`),
		// Both are guarded by the claim's token: if the transaction ended
		// under Do, they must not touch another request's record.
		Complete: r.Replace(`UPDATE {T} SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE key = {key} AND token = {token}`),
		Abandon:  r.Replace(`DELETE FROM {T} WHERE key = {key} AND token = {token}`),
		Purge:    r.Replace(`DELETE FROM {T} WHERE key IN (SELECT key FROM {T} WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})`),
		Run:      runStatements(r),
	}
}

// clock is the database's clock in microseconds since the Unix epoch, which
// leases run on, plus the offset that tests move it by. SQLite reads the
// host's clock, which every process on the host shares, to the
// millisecond; julianday('now') moves during a transaction.
const clock = `(CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + {clock_offset})`

// runStatements are the statements of multi-step requests. SQLite runs
// one writer at a time, so a phase's transaction holds the whole database,
// and no lock of the key's is needed (Lock and TryLock stay empty). Every
// statement that changes an unfinished request checks the token it
// expects: the fence that keeps a runner that lost its lease from writing.
// None changes the incarnation; Progress and the lists return it last.
func runStatements(r *strings.Replacer) dialect.RunStatements {
	r2 := strings.NewReplacer("{NOW}", clock)
	q := func(sql string) string { return r2.Replace(r.Replace(sql)) }
	const (
		mine       = `key = {key} AND token = {token} AND status IS NULL`
		unfinished = `SELECT key, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), {NOW}, incarnation FROM {T}
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}`
	)
	return dialect.RunStatements{
		Start:    q(`UPDATE {T} SET phase = {phase}, lease_until = {NOW} + {lease}, expires_at = {expires_at} WHERE ` + mine),
		Progress: q(`SELECT phase, lease_until, token, created_at, {NOW}, incarnation FROM {T} WHERE key = {key} AND status IS NULL AND phase IS NOT NULL`),
		Takeover: q(`UPDATE {T} SET token = {token}, lease_until = {NOW} + {lease}
WHERE key = {key} AND token = {prev_token} AND status IS NULL AND phase IS NOT NULL AND lease_until <= {NOW}`),
		Advance: q(`UPDATE {T} SET token = {token}, lease_until = {NOW} + {lease} WHERE key = {key} AND token = {prev_token} AND status IS NULL`),
		Mark:    q(`UPDATE {T} SET phase = {phase}, lease_until = {NOW} + {lease} WHERE ` + mine),
		Renew:   q(`UPDATE {T} SET lease_until = {NOW} + {lease} WHERE ` + mine),
		Finish: q(`UPDATE {T} SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum},
	expires_at = {expires_at} WHERE ` + mine),
		Release:    q(`UPDATE {T} SET lease_until = {NOW} WHERE key = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL`),
		Unfinished: q(unfinished + ` ORDER BY created_at LIMIT {limit}`),
		Resumable:  q(unfinished + ` AND lease_until + COALESCE(resume_backoff, 0) <= {NOW} ORDER BY created_at LIMIT {limit}`),
		Backoff: q(`UPDATE {T} SET resume_backoff = min({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
	lease_until = max(lease_until, {NOW}) WHERE key = {key} AND status IS NULL AND phase IS NOT NULL`),
	}
}

// Classify reads the driver's sqlite3.Error, a value whose Code is SQLite's
// primary result code: a busy or locked database is a conflict to retry. A
// column that another connection added between Migrate's check and its
// ALTER TABLE is a plain SQLITE_ERROR, told apart by its message.
func (sqliteMattn) Classify(err error) dialect.ErrorKind {
	var e sqlite3.Error
	if !errors.As(err, &e) {
		return dialect.ErrorOther
	}
	switch {
	case e.Code == sqlite3.ErrBusy || e.Code == sqlite3.ErrLocked:
		return dialect.ErrorRetry
	case e.Code == sqlite3.ErrError && strings.Contains(e.Error(), "duplicate column name"):
		return dialect.ErrorExists
	}
	return dialect.ErrorOther
}
