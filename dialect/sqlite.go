package dialect

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/idemgo/idem/driver"
)

// SQLite returns the dialect of SQLite (3.35 or later, for RETURNING), for
// the modernc.org/sqlite driver.
//
// Services take it through idem.SQLite, whose documentation says what they
// need to know of the database: its versions, locks and settings.
func SQLite() Dialect { return sqlite{} }

type sqlite struct{}

var _ Dialect = sqlite{}

func (sqlite) Name() string { return "sqlite" }

func (sqlite) Placeholder(n int) string { return NumberedPlaceholder("?", n) }

func (sqlite) Schema(table string) []string { return sqliteSchema(table, "") }

// ShardColumnSchema is Schema with shard_key of kind's type
// (sqliteShardType).
func (sqlite) ShardColumnSchema(table string, kind ShardKind) []string {
	return sqliteSchema(table, sqliteShardType(kind))
}

// sqliteShardType is the type of a shard column of kind: INTEGER, TEXT or
// BLOB, whose affinity keeps each value as the Store binds it, compared
// byte for byte (TEXT's default collation, BINARY, is memcmp).
func sqliteShardType(kind ShardKind) string {
	switch kind.Type {
	case ShardInt64:
		return "INTEGER"
	case ShardBytes:
		return "BLOB"
	}
	return "TEXT"
}

// ShardColumnCheck counts the table's shard_key columns, and those whose
// declared type, in pragma_table_info, has the affinity of kind's type
// (sqliteAffinity): SQLite stores and compares a value by its column's
// affinity, not by the name of its type, so a BIGINT column holds an
// int64 as INTEGER does, and a VARCHAR(64) a text as TEXT does. The type
// it returns is the one that Schema declares.
func (sqlite) ShardColumnCheck(table string, kind ShardKind) (string, string) {
	schema, bare := splitTable(table)
	if schema == "" {
		schema = "main"
	}
	typ := sqliteShardType(kind)
	return `SELECT count(*), count(*) FILTER (WHERE ` + sqliteAffinity("upper(type)") + ` = '` + typ + `') FROM pragma_table_info('` + bare + `', '` + schema +
		`') WHERE name = 'shard_key'`, typ
}

// sqliteAffinity is the SQL of the affinity of a column whose declared
// type, in upper case, is the SQL expression typ, by SQLite's rules, in
// their order: a type that contains INT has INTEGER affinity; else one
// that contains CHAR, CLOB or TEXT, TEXT; else one that contains BLOB, or
// none at all, BLOB. Any other has REAL or NUMERIC affinity, written
// NUMERIC here alike, which no kind's column has: they may store a text or
// an integer as another value ("007" as 7, a large integer as a float).
func sqliteAffinity(typ string) string {
	has := func(s string) string { return `instr(` + typ + `, '` + s + `') > 0` }
	return `CASE WHEN ` + has("INT") + ` THEN 'INTEGER'` +
		` WHEN ` + has("CHAR") + ` OR ` + has("CLOB") + ` OR ` + has("TEXT") + ` THEN 'TEXT'` +
		` WHEN ` + has("BLOB") + ` OR trim(` + typ + `) = '' THEN 'BLOB'` +
		` ELSE 'NUMERIC' END`
}

// sqliteSchema is the table, with shard_key of type shard unless shard is
// "".
func sqliteSchema(table, shard string) []string {
	t := QuoteTable(table, '"')
	key, pk := "key          BLOB    NOT NULL PRIMARY KEY,", ""
	if shard != "" {
		key = "shard_key    " + shard + " NOT NULL,\n\tkey          BLOB    NOT NULL,"
		pk = ",\n\tPRIMARY KEY (shard_key, key)"
	}
	_, bare := splitTable(table)
	// SQLite names an index in the table's schema by qualifying the index.
	index := `"` + bare + `_expires_at"`
	if schema, _, ok := strings.Cut(table, "."); ok {
		index = `"` + schema + `".` + index
	}
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + t + ` (
	` + key + `
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
	incarnation  INTEGER NOT NULL DEFAULT 0` + pk + `
)`,
		`CREATE INDEX IF NOT EXISTS ` + index + ` ON "` + bare + `" (expires_at)`,
	}
}

// Upgrades adds the columns that tables made by earlier versions lack: the
// token that guards Complete and Abandon, then the phase and lease of
// multi-step requests, then Resume's back-off, then the record's
// incarnation (0 in the records already there). Each goes at the end of
// the table, so they come in the order of a new table's columns.
func (sqlite) Upgrades(table string) []Upgrade {
	t := QuoteTable(table, '"')
	schema, bare := splitTable(table)
	if schema == "" {
		schema = "main"
	}
	column := func(name, def string) Upgrade {
		return Upgrade{
			Check: `SELECT count(*) FROM pragma_table_info('` + bare + `', '` + schema + `') WHERE name = '` + name + `'`,
			Apply: `ALTER TABLE ` + t + ` ADD COLUMN ` + name + ` ` + def,
		}
	}
	return []Upgrade{
		column("token", "INTEGER NOT NULL DEFAULT 0"),
		column("phase", "TEXT"),
		column("lease_until", "INTEGER"),
		column("resume_backoff", "INTEGER"),
		column("incarnation", "INTEGER NOT NULL DEFAULT 0"),
	}
}

// sqliteExists reports whether err, a plain SQLITE_ERROR, says that a
// column of the same name was there (see ErrorExists), added by another
// connection after this one's check: SQLite has no code of its own for it,
// so only its message tells it apart. CREATE ... IF NOT EXISTS runs under
// the database's write lock and never collides.
func sqliteExists(err error) bool {
	return strings.Contains(err.Error(), "duplicate column name")
}

// sqliteMissingColumn reports whether err, a plain SQLITE_ERROR, says that
// a statement named a column that the table lacks (see
// ErrorMissingColumn), which, as for sqliteExists, only its message tells:
// "no such column" in a read or an update, "has no column named" in an
// insert.
func sqliteMissingColumn(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "no such column") || strings.Contains(msg, "has no column named")
}

func (sqlite) Statements(table string, _ time.Duration) Statements {
	return sqliteStatements(table, keying{k: "key"})
}

// ShardColumnStatements is Statements for a table with shard_key of kind.
func (sqlite) ShardColumnStatements(table string, kind ShardKind, _ time.Duration) Statements {
	return sqliteStatements(table, keying{k: "key", shard: sqliteShardType(kind)})
}

// sqliteStatements is the statements on table, whose records kk names.
func sqliteStatements(table string, kk keying) Statements {
	t := QuoteTable(table, '"')
	tuple := kk.columns("") // the records of a purge's subquery
	if kk.shard != "" {
		tuple = "(" + tuple + ")"
	}
	r := strings.NewReplacer(append(kk.replacer(), "{T}", t, "{record}", record, "{TUPLE}", tuple)...)
	return Statements{
		// The claim returns a row only when it inserted; Do then reads
		// the record with Lookup, and replaces an expired one with
		// Takeover. An upsert that also took over an expired record
		// cost every new key a tenth of its throughput (the statement is
		// compiled anew for each call), for a case that is rare.
		Claim: r.Replace(`INSERT INTO {T} ({KCOLS}, request_hash, created_at, expires_at, token, incarnation)
VALUES ({KVALS}, {request_hash}, {created_at}, {expires_at}, {token}, {incarnation})
ON CONFLICT ({KCOLS}) DO NOTHING
RETURNING 1, 0, {record}`),
		Takeover: r.Replace(takeoverTemplate(kk)),
		Lookup:   r.Replace(`SELECT {record} FROM {T} WHERE {MATCH}`),
		Complete: r.Replace(`UPDATE {T} SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE {MATCH} AND token = {token}`),
		Abandon:  r.Replace(`DELETE FROM {T} WHERE {MATCH} AND token = {token}`),
		Purge:    r.Replace(`DELETE FROM {T} WHERE {TUPLE} IN (SELECT {KCOLS} FROM {T} WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit})`),

		Stats:        r.Replace(statsTemplate),
		CountExpired: r.Replace(countExpiredTemplate),
		Run:          runTemplate(t, kk, sqliteClock, "min", "max"),
	}
}

// sqliteClock is SQLite's clock for leases, in microseconds since the Unix
// epoch: the host's, to the millisecond, which every process on the host
// shares.
const sqliteClock = `CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)`

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
	case sqliteError:
		if sqliteExists(err) {
			return ErrorExists
		}
		if sqliteMissingColumn(err) {
			return ErrorMissingColumn
		}
	}
	return ErrorOther
}

// Hint names the database family of an error that is not SQLite's.
func (sqlite) Hint(err error) string { return wrongServer(err, "SQLite") }

// Capabilities says that SQLite runs one writer at a time.
func (sqlite) Capabilities() Capabilities { return Capabilities{OneWriter: true} }

// The catalog answers TableInspector's questions.
var _ TableInspector = sqlite{}

// TableExists looks in the sqlite_master of the table's schema, main
// unless the name has one.
func (sqlite) TableExists(ctx context.Context, q driver.Tx, table string) (bool, error) {
	schema, name := splitTable(table)
	master := "sqlite_master"
	if schema != "" {
		master = QuoteTable(schema, '"') + ".sqlite_master"
	}
	var ok bool
	err := q.QueryRow(ctx, `SELECT COUNT(*) > 0 FROM `+master+` WHERE type = 'table' AND name = ?`, []any{name}, &ok)
	return ok, err
}

// TableSize adds the pages of the table and its indexes from the dbstat
// virtual table, which modernc.org/sqlite compiles in; where it is missing,
// it measures the whole database file instead, and says so. A missing table
// measures 0.
func (sqlite) TableSize(ctx context.Context, q driver.Tx, table string) (int64, string, error) {
	schema, name := splitTable(table)
	if schema == "" {
		schema = "main"
	}
	s := QuoteTable(schema, '"')
	var size int64
	err := q.QueryRow(ctx, `SELECT COALESCE(SUM(pgsize), 0) FROM dbstat(?)
WHERE name IN (SELECT name FROM `+s+`.sqlite_master WHERE tbl_name = ?)`,
		[]any{schema, name}, &size)
	if err == nil {
		return size, "table and indexes (dbstat)", nil
	}
	err = q.QueryRow(ctx, `SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`, nil, &size)
	return size, "the whole database file (page_count * page_size; dbstat is not available)", err
}
