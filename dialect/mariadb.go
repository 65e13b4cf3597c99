package dialect

import (
	"strconv"
	"strings"
	"time"
)

// MariaDB returns the dialect of MariaDB 10.5 or later with InnoDB, for the
// github.com/go-sql-driver/mysql driver. Its claim is one statement with no
// stored procedure, because it relies on two features of MariaDB that MySQL
// and TiDB lack, INSERT ... RETURNING and SET STATEMENT: on those, use MySQL
// or TiDB. MySQL also runs on MariaDB; the three use the same table.
//
// Services take it through idem.MariaDB, whose documentation says what they
// need to know of the database: its versions, locks and settings.
func MariaDB() Dialect { return mariadb{} }

type mariadb struct{ mysqlFamily }

var _ Dialect = mariadb{}

func (mariadb) Name() string { return "mariadb" }

// Capabilities says that a session may read uncommitted rows.
func (mariadb) Capabilities() Capabilities { return Capabilities{ReadsUncommitted: true} }

func (mariadb) Statements(table string, lockTimeout time.Duration) Statements {
	return mariadbStatements(table, keying{k: "`key`"}, lockTimeout)
}

// ShardColumnStatements is Statements for a table with shard_key of kind.
func (mariadb) ShardColumnStatements(table string, kind ShardKind, lockTimeout time.Duration) Statements {
	return mariadbStatements(table, mysqlKeying(kind), lockTimeout)
}

// mariadbStatements is the statements on table, whose records kk names.
func mariadbStatements(table string, kk keying, lockTimeout time.Duration) Statements {
	st := mysqlStatements(table, kk)
	t := QuoteTable(table, '`')
	r := strings.NewReplacer(append(kk.replacer(), "{T}", t, "{record}", record,
		"{wait}", strconv.FormatInt(lockWaitSeconds(lockTimeout), 10))...)
	// On a live record the update changes nothing, and RETURNING shows
	// the record as it is. The update assigns one column and nothing
	// else: the conditional assignments that would also take over an
	// expired record cost a new key a tenth of its throughput on the
	// server, where an expired record is rare, so Takeover does that in
	// a statement of its own. It cannot wait: the claim holds the row.
	st.Claim = r.Replace(`SET STATEMENT innodb_lock_wait_timeout = {wait} FOR
INSERT INTO {T} ({KCOLS}, request_hash, token, incarnation, created_at, expires_at)
VALUES ({KVALS}, {request_hash}, {token}, {incarnation}, {created_at}, {expires_at})
ON DUPLICATE KEY UPDATE token = token
RETURNING token = {token}, 0, {record}`)
	st.Takeover = r.Replace("SET STATEMENT innodb_lock_wait_timeout = {wait} FOR\n" + takeoverTemplate(kk))
	st.ClaimWrite = ""
	// A plain SELECT is a locking read in a SERIALIZABLE transaction,
	// and would wait the session's whole innodb_lock_wait_timeout (50
	// s by default) behind a transaction that holds the key: a lookup
	// fails at once instead, and Do answers InFlight.
	st.Lookup = "SET STATEMENT innodb_lock_wait_timeout = 0 FOR " + st.Lookup
	// MariaDB 10.5 has no SKIP LOCKED, and runs the comment's words only
	// from 10.6 on: there a purge's batch waits for a held record, under
	// the Store's lock timeout, and is given up when it passes.
	st.PurgeSelect = r.Replace("SET STATEMENT innodb_lock_wait_timeout = {wait} FOR\n" +
		"SELECT {KCOLS} FROM {T} WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit} FOR UPDATE /*M!100600 SKIP LOCKED */")
	st.PurgeDelete = r.Replace("SET STATEMENT innodb_lock_wait_timeout = {wait} FOR\n" + st.PurgeDelete)
	return st
}

// mySyntaxError is the error of a statement that the server cannot parse.
const mySyntaxError = 1064

// Hint says what a syntax error most likely means: a server of the MySQL
// family other than MariaDB, which lacks RETURNING and SET STATEMENT. It
// names the database family of an error that is not the MySQL family's.
func (mariadb) Hint(err error) string {
	if n, ok := mysqlErrorNumber(err); ok && n == mySyntaxError {
		return "the MariaDB dialect needs MariaDB 10.5 or later; for MySQL, use idem.MySQL(), and for TiDB, idem.TiDB()"
	}
	return wrongServer(err, "MySQL-family")
}
