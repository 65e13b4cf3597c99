package idem

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// MySQL returns the dialect of MariaDB 10.5 or later with InnoDB, for the
// github.com/go-sql-driver/mysql driver. It relies on two MariaDB features
// that MySQL 8 lacks, INSERT ... RETURNING and SET STATEMENT, so it does not
// run on MySQL 8.
//
// The claim is one INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING that
// inserts the record, takes over an expired one, or returns the record that
// is there, under a per-statement innodb_lock_wait_timeout of the Store's
// lock timeout rounded up to whole seconds (MariaDB counts no finer). It
// reads the latest committed record even inside a REPEATABLE READ
// transaction that read the table before.
//
// The claim takes an exclusive lock on an existing record until the caller's
// transaction ends, also when it only replays, so a concurrent replay of the
// same key may wait up to the lock timeout. Keys and hashes are compared
// byte for byte (VARBINARY), whatever the collation. The server must keep
// innodb_rollback_on_timeout off, its default, so that a lock wait timeout
// undoes the claim and not the caller's transaction. Deadlocks (1213) and
// innodb_snapshot_isolation conflicts (1020) roll back the whole transaction
// and are returned as ErrRetry; the *sql.Tx then runs in autocommit, which
// is why Complete and Abandon are guarded by the claim's token. Under
// SERIALIZABLE, where a plain SELECT locks, the lookup that follows a claim
// that waited in vain does not wait a second time.
func MySQL() Dialect { return mysql{} }

type mysql struct{}

var _ Dialect = mysql{}

func (mysql) Name() string { return "mysql" }

func (mysql) Placeholder(int) string { return "?" }

func (mysql) Schema(table string) []string {
	t, bare := quoteTable(table, '`')
	return []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	` + "`key`" + `       VARBINARY(512) NOT NULL,
	request_hash VARBINARY(64)  NOT NULL,
	token        BIGINT         NOT NULL,
	created_at   BIGINT         NOT NULL,
	expires_at   BIGINT         NOT NULL,
	status       INT            NULL,
	header       MEDIUMBLOB     NULL,
	body         LONGBLOB       NULL,
	checksum     VARBINARY(32)  NULL,
	PRIMARY KEY (` + "`key`" + `),
	KEY ` + "`" + bare + "_expires_at`" + ` (expires_at)
) ENGINE=InnoDB`}
}

func (mysql) Statements(table string, lockTimeout time.Duration) Statements {
	t, _ := quoteTable(table, '`')
	const record = `request_hash, status, header, body, checksum, created_at, expires_at, token`
	r := strings.NewReplacer("{T}", t, "{record}", record, "{K}", "`key`",
		"{wait}", strconv.FormatInt(lockWaitSeconds(lockTimeout), 10),
		"{expired}", "expires_at <= VALUES(created_at)")
	return Statements{
		// ON DUPLICATE KEY UPDATE assigns left to right, so expires_at,
		// which the condition reads, comes last. On a live record nothing
		// changes and RETURNING shows the record as it is.
		Claim: r.Replace(`SET STATEMENT innodb_lock_wait_timeout = {wait} FOR
INSERT INTO {T} ({K}, request_hash, token, created_at, expires_at)
VALUES ({key}, {request_hash}, {token}, {created_at}, {expires_at})
ON DUPLICATE KEY UPDATE
	request_hash = IF({expired}, VALUES(request_hash), request_hash),
	status       = IF({expired}, NULL, status),
	header       = IF({expired}, NULL, header),
	body         = IF({expired}, NULL, body),
	checksum     = IF({expired}, NULL, checksum),
	token        = IF({expired}, VALUES(token), token),
	created_at   = IF({expired}, VALUES(created_at), created_at),
	expires_at   = IF({expired}, VALUES(expires_at), expires_at)
RETURNING token = {token}, 0, {record}`),
		// A plain SELECT is a locking read in a SERIALIZABLE transaction,
		// and would wait the session's whole innodb_lock_wait_timeout (50
		// s by default) behind a transaction that holds the key. Do looks a
		// key up only after its claim waited, so the lookup does not wait
		// again: a held record fails at once, and Do answers InFlight.
		Lookup:   r.Replace(`SET STATEMENT innodb_lock_wait_timeout = 0 FOR SELECT {record} FROM {T} WHERE {K} = {key}`),
		Complete: r.Replace(`UPDATE {T} SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE {K} = {key} AND token = {token}`),
		Abandon:  r.Replace(`DELETE FROM {T} WHERE {K} = {key} AND token = {token}`),
		Purge:    r.Replace(`DELETE FROM {T} WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit}`),
	}
}

// lockWaitSeconds rounds d up to whole seconds, as MariaDB counts lock waits.
func lockWaitSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return min(s, math.MaxInt32)
}

// MySQL and MariaDB error numbers that a Store acts on.
const (
	myLockWaitTimeout = 1205
	myDeadlock        = 1213
	myCheckRead       = 1020 // MariaDB: record changed since the snapshot
	myLockNowait      = 3572 // MySQL 8: NOWAIT
)

func (mysql) Classify(err error) ErrorKind {
	n, ok := mysqlErrorNumber(err)
	if !ok {
		return ErrorOther
	}
	switch n {
	case myDeadlock, myCheckRead:
		return ErrorRetry
	case myLockWaitTimeout, myLockNowait:
		return ErrorLockTimeout
	}
	return ErrorOther
}

// mysqlErrorNumber finds the server's error number in err. The driver's
// *mysql.MySQLError has no method to ask, and the root package imports no
// driver, so it is read by reflection: a struct named MySQLError with a
// uint16 field Number, from a package whose path ends in go-sql-driver/mysql.
func mysqlErrorNumber(err error) (uint16, bool) {
	for _, e := range errorChain(err) {
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Pointer && !v.IsNil() {
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			continue
		}
		t := v.Type()
		if t.Name() != "MySQLError" || !strings.HasSuffix(t.PkgPath(), "go-sql-driver/mysql") {
			continue
		}
		if f := v.FieldByName("Number"); f.IsValid() && f.Kind() == reflect.Uint16 {
			return uint16(f.Uint()), true
		}
	}
	return 0, false
}

// errorChain lists err and every error it wraps, depth first.
func errorChain(err error) []error {
	var chain []error
	var walk func(error)
	walk = func(e error) {
		for e != nil {
			chain = append(chain, e)
			switch u := e.(type) {
			case interface{ Unwrap() []error }:
				for _, inner := range u.Unwrap() {
					walk(inner)
				}
				return
			case interface{ Unwrap() error }:
				e = u.Unwrap()
			default:
				return
			}
		}
	}
	walk(err)
	return chain
}
