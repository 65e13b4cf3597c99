package dialect

import (
	"strconv"
	"strings"
	"time"
)

// TiDB returns the dialect of TiDB, for the github.com/go-sql-driver/mysql
// driver. It uses the table of MySQL and MariaDB.
//
// Services take it through idem.TiDB, whose documentation says what they
// need to know of the database: its versions, locks and settings.
func TiDB() Dialect { return tidb{} }

type tidb struct{ mysqlFamily }

var _ Dialect = tidb{}

func (tidb) Name() string { return "tidb" }

func (tidb) Statements(table string, lockTimeout time.Duration) Statements {
	return tidbStatements(table, keying{k: "`key`"}, lockTimeout)
}

// ShardColumnStatements is Statements for a table with shard_key of kind.
func (tidb) ShardColumnStatements(table string, kind ShardKind, lockTimeout time.Duration) Statements {
	return tidbStatements(table, mysqlKeying(kind), lockTimeout)
}

// tidbStatements is the statements on table, whose records kk names.
func tidbStatements(table string, kk keying, lockTimeout time.Duration) Statements {
	st := mysqlStatements(table, kk)
	t := QuoteTable(table, '`')
	hint := "/*+ SET_VAR(innodb_lock_wait_timeout = " + strconv.FormatInt(lockWaitSeconds(lockTimeout), 10) + ") */"
	hinted := func(q, verb string) string { return strings.Replace(q, verb, verb+" "+hint, 1) }
	st.ClaimWrite = hinted(st.ClaimWrite, "INSERT")
	// The insert holds the record, so the read waits for nothing.
	st.Claim = "SELECT token = {token}, 0, " + record + " FROM " + t + " WHERE " + kk.match("") + " FOR UPDATE"
	// A purge's batch that waits for a held record gives up after the
	// Store's lock timeout, and Purge answers ErrRetry.
	st.PurgeSelect = hinted(st.PurgeSelect, "SELECT")
	st.PurgeDelete = hinted(st.PurgeDelete, "DELETE")
	return st
}

// tidbUnknown is the error number of TiDB's errors without a number of
// their own; a lock wait that times out under READ COMMITTED is one of
// them, "lock wait timeout".
const tidbUnknown = 1105

// Classify is the family's, and also knows TiDB's lock wait timeout under
// READ COMMITTED.
func (d tidb) Classify(err error) ErrorKind {
	if n, msg, ok := mysqlError(err); ok && n == tidbUnknown && strings.Contains(msg, "lock wait timeout") {
		return ErrorLockTimeout
	}
	return d.mysqlFamily.Classify(err)
}

// Capabilities says that a claim waits at least a second: TiDB accepts no
// innodb_lock_wait_timeout below 1.
func (tidb) Capabilities() Capabilities { return Capabilities{MinLockWait: time.Second} }

// Hint names the database family of an error that is not the MySQL
// family's.
func (tidb) Hint(err error) string { return wrongServer(err, "MySQL-family") }
