package idem

import (
	"errors"
	"strings"
	"time"
)

// SQLite returns the dialect of SQLite (3.35 or later, for RETURNING), for
// the modernc.org/sqlite driver.
//
// SQLite lets one transaction write at a time, so a claim never sees a key
// held by another: the second writer waits at BEGIN instead. Open the
// database with a busy timeout, so that it waits rather than fails at once,
// and with _txlock=immediate, so that every transaction takes the write lock
// when it begins rather than at its first write, where SQLite would refuse
// it to avoid a deadlock:
//
//	file:app.db?_txlock=immediate&_pragma=busy_timeout(5000)
//
// Without them, concurrent requests get SQLITE_BUSY (also in its
// SQLITE_BUSY_SNAPSHOT form under WAL), which Do returns as ErrRetry and DoTx
// retries. The lock timeout of the Store does not apply: the busy timeout is
// the wait.
func SQLite() Dialect { return sqlite{} }

type sqlite struct{}

var _ Dialect = sqlite{}

func (sqlite) Name() string { return "sqlite" }

func (sqlite) Placeholder(n int) string { return NumberedPlaceholder("?", n) }

func (sqlite) Schema(table string) []string {
	t, bare := quoteTable(table, '"')
	// SQLite names an index in the table's schema by qualifying the index.
	index := `"` + bare + `_expires_at"`
	if schema, _, ok := strings.Cut(table, "."); ok {
		index = `"` + schema + `".` + index
	}
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + t + ` (
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
	resume_backoff INTEGER
)`,
		`CREATE INDEX IF NOT EXISTS ` + index + ` ON "` + bare + `" (expires_at)`,
	}
}

// upgrades adds the columns that tables made by earlier versions lack: the
// token that guards Complete and Abandon, then the phase and lease of
// multi-step requests, then the Resumer's back-off. Each goes at the end of the table, so they come in
// the order of a new table's columns.
func (sqlite) upgrades(table string) []upgrade {
	t, bare := quoteTable(table, '"')
	schema := "main"
	if s, _, ok := strings.Cut(table, "."); ok {
		schema = s
	}
	column := func(name, def string) upgrade {
		return upgrade{
			check: `SELECT count(*) FROM pragma_table_info('` + bare + `', '` + schema + `') WHERE name = '` + name + `'`,
			apply: `ALTER TABLE ` + t + ` ADD COLUMN ` + name + ` ` + def,
		}
	}
	return []upgrade{
		column("token", "INTEGER NOT NULL DEFAULT 0"),
		column("phase", "TEXT"),
		column("lease_until", "INTEGER"),
		column("resume_backoff", "INTEGER"),
	}
}

// existed: a column of the same name was there (see upgrader), added by
// another connection after this one's check. SQLite reports it as a plain
// SQLITE_ERROR, so only its message tells it apart; CREATE ... IF NOT
// EXISTS runs under the database's write lock and never collides.
func (sqlite) existed(err error) bool {
	var e interface{ Code() int }
	if !errors.As(err, &e) || e.Code()&0xff != sqliteError {
		return false
	}
	return strings.Contains(err.Error(), "duplicate column name")
}

func (sqlite) Statements(table string, _ time.Duration) Statements {
	t, _ := quoteTable(table, '"')
	const record = `request_hash, status, header, body, checksum, created_at, expires_at, token`
	r := strings.NewReplacer("{T}", t, "{record}", record)
	return Statements{
		// The claim returns a row only when it inserted; Do then reads
		// the record with Lookup, and replaces an expired one with
		// Takeover. An upsert that also took over an expired record
		// cost every new key a tenth of its throughput (the statement is
		// compiled anew for each call), for a case that is rare.
		Claim: r.Replace(`INSERT INTO {T} (key, request_hash, created_at, expires_at, token)
VALUES ({key}, {request_hash}, {created_at}, {expires_at}, {token})
ON CONFLICT (key) DO NOTHING
RETURNING 1, 0, {record}`),
		Takeover: r.Replace(takeoverTemplate("key")),
		Lookup:   r.Replace(`SELECT {record} FROM {T} WHERE key = {key}`),
		Complete: r.Replace(`UPDATE {T} SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE key = {key} AND token = {token}`),
		Abandon:  r.Replace(`DELETE FROM {T} WHERE key = {key} AND token = {token}`),
		Purge:    r.Replace(`DELETE FROM {T} WHERE key IN (SELECT key FROM {T} WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})`),
	}
}

// SQLite primary result codes that a Store acts on. Extended codes, such as
// SQLITE_BUSY_SNAPSHOT (517), carry the primary code in their low byte.
const (
	sqliteError  = 1
	sqliteBusy   = 5
	sqliteLocked = 6
)

func (sqlite) Classify(err error) ErrorKind {
	// modernc.org/sqlite's *sqlite.Error reports its code through Code.
	var e interface{ Code() int }
	if !errors.As(err, &e) {
		return ErrorOther
	}
	switch e.Code() & 0xff {
	case sqliteBusy, sqliteLocked:
		return ErrorRetry
	}
	return ErrorOther
}

// Capabilities says that SQLite runs one writer at a time.
func (sqlite) Capabilities() Capabilities { return Capabilities{OneWriter: true} }
