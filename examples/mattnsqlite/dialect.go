// Package mattnsqlite is an idem dialect for SQLite through the cgo driver
// github.com/mattn/go-sqlite3, written by following docs/dialects.md. It is
// an example of a dialect outside package idem: its claim inserts with ON
// CONFLICT DO NOTHING and leaves expired records to a separate takeover
// statement, and it reads SQLite's errors the way this driver reports them.
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

	"github.com/idemgo/idem"
)

// Dialect returns the dialect.
func Dialect() idem.Dialect { return dialect{} }

type dialect struct{}

var _ idem.Dialect = dialect{}

func (dialect) Name() string { return "sqlite-mattn" }

// Placeholder numbers its markers, "?1", "?2", so a parameter used twice is
// bound once.
func (dialect) Placeholder(n int) string { return idem.NumberedPlaceholder("?", n) }

// Capabilities says that SQLite runs one writing transaction at a time: a
// second writer waits at BEGIN (opened with _txlock=immediate), so a claim
// never meets a key that another transaction holds, and idemtest.TestDialect
// skips the properties that need two writers at once.
func (dialect) Capabilities() idem.Capabilities { return idem.Capabilities{OneWriter: true} }

// quote quotes a table name that idem.WithTable accepted, each part of
// "schema.table" on its own, so that a name that is a keyword ("order")
// works too.
func quote(table string) string { return idem.QuoteTable(table, '"') }

// Schema keeps keys and hashes as BLOBs, which SQLite compares byte for
// byte, and times as integers (microseconds). The index on expires_at lives
// in the table's schema: SQLite takes the schema from the index's name and
// wants the table after ON without one.
func (dialect) Schema(table string) []string {
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
	token        INTEGER NOT NULL DEFAULT 0
)`,
		`CREATE INDEX IF NOT EXISTS ` + quote(table+"_expires_at") + ` ON ` + quote(bare) + ` (expires_at)`,
	}
}

func (dialect) Statements(table string, _ time.Duration) idem.Statements {
	const record = `request_hash, status, header, body, checksum, created_at, expires_at, token`
	r := strings.NewReplacer("{T}", quote(table), "{record}", record)
	return idem.Statements{
		// RETURNING yields a row only when this statement inserted; a
		// loser gets no row, and Do looks the record up.
		Claim: r.Replace(`INSERT INTO {T} (key, request_hash, created_at, expires_at, token)
VALUES ({key}, {request_hash}, {created_at}, {expires_at}, {token})
ON CONFLICT (key) DO NOTHING
RETURNING 1, 0, {record}`),
		Takeover: r.Replace(`UPDATE {T} SET request_hash = {request_hash}, created_at = {created_at}, expires_at = {expires_at},
	token = {token}, status = NULL, header = NULL, body = NULL, checksum = NULL
WHERE key = {key} AND expires_at <= {created_at}`),
		Lookup: r.Replace(`SELECT {record} FROM {T} WHERE key = {key}`),
		// Both are guarded by the claim's token: if the transaction ended
		// under Do, they must not touch another request's record.
		Complete: r.Replace(`UPDATE {T} SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE key = {key} AND token = {token}`),
		Abandon:  r.Replace(`DELETE FROM {T} WHERE key = {key} AND token = {token}`),
		Purge:    r.Replace(`DELETE FROM {T} WHERE key IN (SELECT key FROM {T} WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})`),
	}
}

// Classify reads the driver's sqlite3.Error, a value whose Code is SQLite's
// primary result code: a busy or locked database is a conflict to retry.
func (dialect) Classify(err error) idem.ErrorKind {
	var e sqlite3.Error
	if errors.As(err, &e) && (e.Code == sqlite3.ErrBusy || e.Code == sqlite3.ErrLocked) {
		return idem.ErrorRetry
	}
	return idem.ErrorOther
}
