package dialect

import (
	"context"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/idemgo/idem/driver"
)

// MySQL returns the dialect of MySQL 8.0.29 or later with InnoDB, for the
// github.com/go-sql-driver/mysql driver. It also runs on MariaDB 10.6 or
// later, where MariaDB claims in one statement without a procedure; on
// TiDB, which has no stored procedures, use TiDB. The three use the same
// table.
//
// Services take it through idem.MySQL, whose documentation says what they
// need to know of the database: its versions, locks and settings.
func MySQL() Dialect { return mysql{} }

type mysql struct{ mysqlFamily }

var _ Dialect = mysql{}

func (mysql) Name() string { return "mysql" }

func (mysql) Statements(table string, lockTimeout time.Duration) Statements {
	return mysqlClaimStatements(table, keying{k: "`key`"}, claimProcedure(table), lockTimeout)
}

// ShardColumnStatements is Statements for a table with shard_key of kind,
// whose procedure (shardClaimProcedure) takes the shard value first.
func (mysql) ShardColumnStatements(table string, kind ShardKind, lockTimeout time.Duration) Statements {
	return mysqlClaimStatements(table, mysqlKeying(kind), shardClaimProcedure(table, kind), lockTimeout)
}

// mysqlClaimStatements is the statements on table, whose records kk names
// and whose claim calls the procedure proc.
func mysqlClaimStatements(table string, kk keying, proc string, lockTimeout time.Duration) Statements {
	st := mysqlStatements(table, kk)
	st.Claim = "CALL " + proc + "(" + kk.values("") + ", {request_hash}, {token}, {incarnation}, {created_at}, {expires_at}, " +
		strconv.FormatInt(lockWaitSeconds(lockTimeout), 10) + ")"
	st.ClaimedWithoutRow = true
	st.ClaimWrite = ""
	return st
}

// Capabilities says that a claim waits at least a second, as MySQL accepts
// no innodb_lock_wait_timeout below 1, and that a session may read
// uncommitted rows.
func (mysql) Capabilities() Capabilities {
	return Capabilities{MinLockWait: time.Second, ReadsUncommitted: true}
}

// claimProcedure names the claim's procedure of table, quoted: in the
// table's database, the table's name with _claim2 appended. The names that
// idem.WithTable accepts leave room for the suffix within MySQL's 64
// characters.
func claimProcedure(table string) string {
	return QuoteTable(table+"_claim2", '`')
}

// firstClaimProcedure names the claim's procedure of the versions before
// records had an incarnation, which their binaries call: the table's name
// with _claim appended.
func firstClaimProcedure(table string) string {
	return QuoteTable(table+"_claim", '`')
}

// shardClaimProcedure names the claim's procedure of table with a shard
// column of kind, quoted: the table's name with _claim_int64 appended for
// an int64 column, _claim_bytes for the others, whose shard parameter is
// a VARBINARY that holds any of their values (shardParameter). The names
// are new with shard kinds: the procedures of earlier versions took a
// parameter of the column's declared type, which could round or cut a
// value before the claim compared it, and go on serving the binaries that
// call them.
func shardClaimProcedure(table string, kind ShardKind) string {
	if kind.Type == ShardInt64 {
		return QuoteTable(table+"_claim_int64", '`')
	}
	return QuoteTable(table+"_claim_bytes", '`')
}

// shardParameter is the type of the shard parameter of the claim's
// procedure for a column of kind: a BIGINT for an int64, and a VARBINARY
// of MaxShardBytes for the others, so that one procedure serves every
// length of a kind, and a column that grows keeps its procedure.
func shardParameter(kind ShardKind) string {
	if kind.Type == ShardInt64 {
		return "BIGINT"
	}
	return "VARBINARY(" + strconv.Itoa(MaxShardBytes) + ")"
}

// claimProcedureSQL creates the claim's procedure of table (see MySQL),
// whose records kk names: with a shard column, the procedure takes the
// shard value, s, first. Its parameters take no names of the table's
// columns, which a procedure's own names would hide.
//
// The procedure tells a claim that found a record from one that inserted by
// LAST_INSERT_ID(~lid) in the update clause, which runs only on a record
// that was there, where lid is the session's LAST_INSERT_ID, which the
// procedure puts back: ROW_COUNT cannot tell, since it counts a live record
// left as it is as 1, an insert's count, when the DSN sets clientFoundRows.
// The IF keeps the call from being folded away; its NULL is never chosen.
// A record that was there is read by its key alone, which locks that record
// and no other (an UPDATE that also checked the expiry would scan on to the
// next key and lock it, and replays of neighbouring keys would wait for one
// another), taken over when it has expired, with the claim's token and
// incarnation, and sent, claimed when it carries the claim's token; one row
// is sent whatever the read finds, NULLs where it finds no record, since no
// row at all means that the claim inserted. The update clause assigns
// nothing else, the variables of a record are declared only where one was
// found, and the lock wait is set only where the session's own differs:
// every statement of the procedure costs the server time that each new key
// pays.
func claimProcedureSQL(table string, kk keying, proc string) string {
	return procedureSQL(table, kk, proc, record,
		"IN inc BIGINT, ", "incarnation, ", "inc, ", ", i", "incarnation = inc, ", ", i = inc")
}

// firstClaimProcedureSQL creates the claim's procedure of the versions
// before records had an incarnation (firstClaimProcedure), as they created
// it, byte for byte (TestPreviousStatementsArePinned), for their binaries
// to call during a rolling upgrade (see MySQL): claimProcedureSQL without
// the incarnation, which the records that it creates hold 0 in, and those
// that it takes over keep as it was.
func firstClaimProcedureSQL(table string, kk keying) string {
	return procedureSQL(table, kk, firstClaimProcedure(table), recordWithoutIncarnation, "", "", "", "", "", "")
}

// procedureSQL writes a claim's procedure of table, named name, whose
// records kk names, reading the record columns rec; the other arguments are
// what the incarnation adds to it: a parameter, a column of the insert, its
// value there, a variable after the token's, its assignment in a takeover,
// and its value after one.
func procedureSQL(table string, kk keying, name, rec, param, column, value, variable, assign, taken string) string {
	t := QuoteTable(table, '`')
	shardIn, match, cols, vals := "", "`key` = k", "`key`", "k"
	if kk.shard != "" {
		shardIn, match, cols, vals = "IN s "+kk.shard+", ", "shard_key = s AND `key` = k", "shard_key, `key`", "s, k"
	}
	return strings.NewReplacer("{P}", name, "{T}", t, "{record}", rec,
		"{S}", shardIn, "{MATCH}", match, "{KCOLS}", cols, "{KVALS}", vals,
		"{INC}", param, "{ICOL}", column, "{IVAL}", value, "{IVAR}", variable, "{ISET}", assign, "{ITAKEN}", taken,
	).Replace(`CREATE PROCEDURE IF NOT EXISTS {P}({S}IN k VARBINARY(512), IN h VARBINARY(64), IN tok BIGINT, {INC}IN ca BIGINT, IN ea BIGINT, IN w INT)
SQL SECURITY INVOKER
MODIFIES SQL DATA
BEGIN
	DECLARE saved BIGINT DEFAULT @@SESSION.innodb_lock_wait_timeout;
	DECLARE lid BIGINT UNSIGNED DEFAULT LAST_INSERT_ID();
	DECLARE EXIT HANDLER FOR SQLEXCEPTION
	BEGIN
		SET SESSION innodb_lock_wait_timeout = saved;
		DO LAST_INSERT_ID(lid);
		RESIGNAL;
	END;
	IF w <> saved THEN
		SET SESSION innodb_lock_wait_timeout = w;
	END IF;
	INSERT INTO {T} ({KCOLS}, request_hash, token, {ICOL}created_at, expires_at)
	VALUES ({KVALS}, h, tok, {IVAL}ca, ea)
	ON DUPLICATE KEY UPDATE token = IF(LAST_INSERT_ID(~lid) = ~lid, token, NULL);
	IF w <> saved THEN
		SET SESSION innodb_lock_wait_timeout = saved;
	END IF;
	IF LAST_INSERT_ID() <> lid THEN
		DO LAST_INSERT_ID(lid);
		BEGIN
			DECLARE rh VARBINARY(64);
			DECLARE st INT;
			DECLARE hd MEDIUMBLOB;
			DECLARE bd LONGBLOB;
			DECLARE cs VARBINARY(32);
			DECLARE c, e, t{IVAR} BIGINT;
			SELECT {record} INTO rh, st, hd, bd, cs, c, e, t{IVAR} FROM {T} WHERE {MATCH} FOR UPDATE;
			IF e <= ca THEN
				UPDATE {T} SET request_hash = h, created_at = ca, expires_at = ea,
					token = tok, {ISET}status = NULL, header = NULL, body = NULL, checksum = NULL
				WHERE {MATCH};
				SET rh = h, st = NULL, hd = NULL, bd = NULL, cs = NULL, c = ca, e = ea, t = tok{ITAKEN};
			END IF;
			SELECT t <=> tok, FALSE, rh, st, hd, bd, cs, c, e, t{IVAR};
		END;
	END IF;
END`)
}

// Schema adds, to the family's table, the claim's procedures, the first
// for the binaries of earlier versions and the current one, which tables
// made by earlier versions lack too: CREATE PROCEDURE IF NOT EXISTS (MySQL
// 8.0.29 or later) finds one there when it is.
func (m mysql) Schema(table string) []string {
	kk := keying{k: "`key`"}
	return append(m.mysqlFamily.Schema(table), firstClaimProcedureSQL(table, kk), claimProcedureSQL(table, kk, claimProcedure(table)))
}

// ShardColumnSchema is Schema with shard_key of kind, and the claim's
// procedure of that kind (shardClaimProcedure). The procedures that
// earlier versions made for such a table stay as they are.
func (m mysql) ShardColumnSchema(table string, kind ShardKind) []string {
	kk := mysqlKeying(kind)
	kk.shard = shardParameter(kind) // the procedure's parameter
	return append(m.mysqlFamily.ShardColumnSchema(table, kind), claimProcedureSQL(table, kk, shardClaimProcedure(table, kind)))
}

// Error numbers that Hint names.
const (
	myProcDenied    = 1370 // EXECUTE command denied
	tidbUnsupported = 8108 // TiDB: an unsupported statement, such as CREATE PROCEDURE
)

// Hint says what the errors of a claim through the procedure most likely
// mean, and names the database family of an error that is not the MySQL
// family's.
func (mysql) Hint(err error) string {
	n, _ := mysqlErrorNumber(err)
	switch n {
	case myDoesNotExist:
		return "the MySQL dialect claims through a stored procedure that Migrate (or the migration files) creates: run it first"
	case myProcDenied:
		return "the MySQL dialect claims through a stored procedure: grant EXECUTE on it"
	case tidbUnsupported, mySyntaxError:
		return "the MySQL dialect needs MySQL 8.0.29 or later, or MariaDB 10.6; TiDB has no stored procedures: use idem.TiDB()"
	}
	return wrongServer(err, "MySQL-family")
}

// mysqlFamily holds what MySQL, MariaDB and TiDB share: the table, its
// upgrades, the placeholders, the meaning of errors and the catalog.
type mysqlFamily struct{}

func (mysqlFamily) Placeholder(int) string { return "?" }

func (mysqlFamily) Schema(table string) []string { return mysqlSchema(table, "") }

// ShardColumnSchema is Schema with shard_key of kind's type
// (mysqlShardType).
func (mysqlFamily) ShardColumnSchema(table string, kind ShardKind) []string {
	return mysqlSchema(table, mysqlShardType(kind))
}

// mysqlShardType is the type of a shard column of kind in the MySQL
// family: binary strings for every kind but int64, so that values compare
// byte for byte whatever the collation (a text column would find
// "TENANT-a", "ténant-a" and, in a collation that pads, "tenant-a " equal
// to "tenant-a"), and never pad (VARBINARY) but where every value has the
// same length (a UUID's 36 bytes).
func mysqlShardType(kind ShardKind) string {
	switch kind.Type {
	case ShardInt64:
		return "BIGINT"
	case ShardText, ShardBytes:
		return "VARBINARY(" + strconv.Itoa(kind.MaxBytes) + ")"
	case ShardUUID:
		return "BINARY(36)"
	}
	return ""
}

// mysqlKeying is the keying of a table of the MySQL family with a shard
// column of kind.
func mysqlKeying(kind ShardKind) keying {
	return keying{k: "`key`", shard: mysqlShardType(kind)}
}

// ShardColumnCheck counts the table's shard_key columns, and those of
// kind's type or, for text and bytes, of a longer VARBINARY, which holds
// the kind's values as well, in information_schema.COLUMNS.
func (mysqlFamily) ShardColumnCheck(table string, kind ShardKind) (string, string) {
	s, bare := splitTable(table)
	schema := "DATABASE()"
	if s != "" {
		schema = "'" + s + "'"
	}
	var fits string
	switch kind.Type {
	case ShardInt64:
		fits = "DATA_TYPE = 'bigint' AND COLUMN_TYPE NOT LIKE '%unsigned%'"
	case ShardText, ShardBytes:
		fits = "DATA_TYPE = 'varbinary' AND CHARACTER_MAXIMUM_LENGTH >= " + strconv.Itoa(kind.MaxBytes)
	default:
		fits = "DATA_TYPE = 'binary' AND CHARACTER_MAXIMUM_LENGTH = 36"
	}
	return `SELECT COUNT(*), COALESCE(SUM(` + fits + `), 0) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ` + schema +
		` AND TABLE_NAME = '` + bare + `' AND COLUMN_NAME = 'shard_key'`, mysqlShardType(kind)
}

// mysqlSchema is the family's table, with shard_key of type shard unless
// shard is "".
func mysqlSchema(table, shard string) []string {
	t := QuoteTable(table, '`')
	_, bare := splitTable(table)
	shardCol, pk := "", "`key`"
	if shard != "" {
		shardCol, pk = "shard_key    "+shard+" NOT NULL,\n\t", "shard_key, `key`"
	}
	return []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	` + shardCol + "`key`" + `       VARBINARY(512) NOT NULL,
	request_hash VARBINARY(64)  NOT NULL,
	token        BIGINT         NOT NULL,
	created_at   BIGINT         NOT NULL,
	expires_at   BIGINT         NOT NULL,
	status       INT            NULL,
	header       MEDIUMBLOB     NULL,
	body         LONGBLOB       NULL,
	checksum     VARBINARY(32)  NULL,
	phase        VARBINARY(64)  NULL,
	lease_until  BIGINT         NULL,
	resume_backoff BIGINT       NULL,
	incarnation  BIGINT         NOT NULL DEFAULT 0,
	PRIMARY KEY (` + pk + `),
	KEY ` + "`" + bare + "_expires_at`" + ` (expires_at)
) ENGINE=InnoDB`}
}

// Upgrades adds the columns that tables made by earlier versions lack: the
// phase and lease of multi-step requests (the family's first table had the
// token already), then Resume's back-off, then the record's incarnation
// (0 in the records already there). Each goes at the end of the table, so
// they come in the order of a new table's columns. MySQL has no ADD COLUMN
// IF NOT EXISTS, so only the check keeps a second run from adding a column
// twice; a table named without its database is in the session's,
// DATABASE().
func (mysqlFamily) Upgrades(table string) []Upgrade {
	t := QuoteTable(table, '`')
	s, bare := splitTable(table)
	schema := "DATABASE()"
	if s != "" {
		schema = "'" + s + "'"
	}
	column := func(name, def string) Upgrade {
		return Upgrade{
			Check: `SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ` + schema +
				` AND TABLE_NAME = '` + bare + `' AND COLUMN_NAME = '` + name + `'`,
			Apply: `ALTER TABLE ` + t + ` ADD COLUMN ` + name + ` ` + def,
		}
	}
	return []Upgrade{
		column("phase", "VARBINARY(64) NULL"),
		column("lease_until", "BIGINT NULL"),
		column("resume_backoff", "BIGINT NULL"),
		column("incarnation", "BIGINT NOT NULL DEFAULT 0"),
	}
}

// Error numbers of a DDL statement whose object was there already.
const (
	myTableExists   = 1050
	myDupColumnName = 1060
	myDupKeyName    = 1061
	mySPExists      = 1304 // MySQL's claim procedure
)

// myDoesNotExist is the error of CALL of a procedure that does not exist
// (ER_SP_DOES_NOT_EXIST).
const myDoesNotExist = 1305

// mysqlStatements returns the statements that the family shares, on table
// whose records kk names, with the claim's write in ClaimWrite.
func mysqlStatements(table string, kk keying) Statements {
	t := QuoteTable(table, '`')
	r := strings.NewReplacer(append(kk.replacer(), "{T}", t, "{record}", record,
		"{expired}", "expires_at <= VALUES(created_at)")...)
	return Statements{
		// ON DUPLICATE KEY UPDATE assigns left to right, so expires_at,
		// which the condition reads, comes last. VALUES(col), the value
		// the INSERT would have written, is deprecated in MySQL 8.0.20
		// for a row alias that TiDB does not know, and works on all.
		ClaimWrite: r.Replace(`INSERT INTO {T} ({KCOLS}, request_hash, token, incarnation, created_at, expires_at)
VALUES ({KVALS}, {request_hash}, {token}, {incarnation}, {created_at}, {expires_at})
ON DUPLICATE KEY UPDATE
	request_hash = IF({expired}, VALUES(request_hash), request_hash),
	status       = IF({expired}, NULL, status),
	header       = IF({expired}, NULL, header),
	body         = IF({expired}, NULL, body),
	checksum     = IF({expired}, NULL, checksum),
	token        = IF({expired}, VALUES(token), token),
	incarnation  = IF({expired}, VALUES(incarnation), incarnation),
	created_at   = IF({expired}, VALUES(created_at), created_at),
	expires_at   = IF({expired}, VALUES(expires_at), expires_at)`),
		Lookup:   r.Replace(`SELECT {record} FROM {T} WHERE {MATCH}`),
		Complete: r.Replace(`UPDATE {T} SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE {MATCH} AND token = {token}`),
		Abandon:  r.Replace(`DELETE FROM {T} WHERE {MATCH} AND token = {token}`),
		// A purge locks its batch skipping the records that claims
		// hold (MySQL 8.0.1, MariaDB 10.6), then deletes it by key,
		// checking the expiry again. A DELETE ... ORDER BY ... LIMIT
		// would wait for a held record while it kept the locks of
		// those it had deleted (docs/failure-modes.md). The delete
		// must find its rows through the primary key, which touches
		// only the rows the batch holds: InnoDB locks every row a
		// statement scans, and on a small table the optimizer scans
		// the whole of it, held records included.
		PurgeSelect:  r.Replace(`SELECT {KCOLS} FROM {T} WHERE expires_at <= {now} ORDER BY expires_at LIMIT {limit} FOR UPDATE SKIP LOCKED`),
		PurgeDelete:  r.Replace(`DELETE p FROM {T} AS p FORCE INDEX (PRIMARY) WHERE ` + kk.in("p.") + ` AND p.expires_at <= {now}`),
		Stats:        r.Replace(statsTemplate),
		CountExpired: r.Replace(countExpiredTemplate),
		Run:          mysqlRun(t, kk),
	}
}

// mysqlClock is the MySQL family's clock for leases, in microseconds since
// the Unix epoch: UTC_TIMESTAMP(6) is the statement's start, in UTC, so
// that no time zone or change of daylight saving time moves a lease, as
// SYSDATE's local time would.
const mysqlClock = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`

// mysqlRun is the shared statements of multi-step requests, with Progress
// a locking read. A plain read sees the transaction's snapshot, which TiDB
// takes at BEGIN: it would miss a record committed after it, which the
// claim before it, a locking read, saw and locked. Locking, it reads the
// latest. It waits for nothing: the claim holds the row already, or lost it
// to a phase that runs, and the read then fails at once.
func mysqlRun(t string, kk keying) RunStatements {
	s := runTemplate(t, kk, mysqlClock, "LEAST", "GREATEST")
	s.Progress += " FOR UPDATE NOWAIT"
	return s
}

// lockWaitSeconds rounds d up to whole seconds, as MariaDB counts lock waits.
func lockWaitSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return min(s, math.MaxInt32)
}

// Error numbers of the MySQL family that a Store acts on.
const (
	myLockWaitTimeout = 1205
	myDeadlock        = 1213
	myCheckRead       = 1020 // MariaDB: record changed since the snapshot
	myLockNowait      = 3572 // MySQL 8: NOWAIT
	myBadField        = 1054 // unknown column

	// TiDB's own, each of a transaction that TiDB has rolled back and
	// that may run again.
	tidbForUpdateConflict = 8002 // a transaction that read FOR UPDATE met a write conflict
	tidbStaleWrite        = 8005 // write conflict, txnStartTS is stale
	tidbRetryable         = 8022 // the commit failed and was rolled back
	tidbSchemaChanged     = 8028 // the table's schema changed during the transaction
	tidbWriteConflict     = 9007 // optimistic mode: another transaction committed the key first
)

func (mysqlFamily) Classify(err error) ErrorKind {
	n, ok := mysqlErrorNumber(err)
	if !ok {
		return ErrorOther
	}
	switch n {
	case myTableExists, myDupColumnName, myDupKeyName, mySPExists:
		// The MySQL family waits for a concurrent ALTER TABLE on the
		// table's metadata lock and then reports the column it added
		// as a duplicate.
		return ErrorExists
	case myDeadlock, myCheckRead,
		tidbForUpdateConflict, tidbStaleWrite, tidbRetryable, tidbSchemaChanged, tidbWriteConflict:
		return ErrorRetry
	case myLockWaitTimeout, myLockNowait:
		return ErrorLockTimeout
	case myBadField:
		return ErrorMissingColumn
	}
	return ErrorOther
}

// mysqlErrorNumber finds the server's error number in err.
func mysqlErrorNumber(err error) (uint16, bool) {
	n, _, ok := mysqlError(err)
	return n, ok
}

// mysqlError finds the server's error number and message in err. The
// driver's *mysql.MySQLError has no method to ask, and the root package
// imports no driver, so it is read by reflection: a struct named MySQLError
// with a uint16 field Number and a string field Message, from a package
// whose path ends in go-sql-driver/mysql. An error that reports its number
// through a method MySQLErrorNumber() uint16 is read through it, with its
// Error as the message: that is how a package that must not import the
// driver, such as idemtest, builds an error that the MySQL family
// classifies (TestClassifyMySQLErrorNumber).
func mysqlError(err error) (uint16, string, bool) {
	for _, e := range errorChain(err) {
		if n, ok := e.(interface{ MySQLErrorNumber() uint16 }); ok {
			return n.MySQLErrorNumber(), e.Error(), true
		}
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
			var msg string
			if m := v.FieldByName("Message"); m.IsValid() && m.Kind() == reflect.String {
				msg = m.String()
			}
			return uint16(f.Uint()), msg, true
		}
	}
	return 0, "", false
}

// The catalog answers TableInspector's questions.
var _ TableInspector = mysqlFamily{}

// TableExists looks in information_schema.tables, in the connection's
// current database unless the name has a schema.
func (mysqlFamily) TableExists(ctx context.Context, q driver.Tx, table string) (bool, error) {
	schema, name := splitTable(table)
	var ok bool
	err := q.QueryRow(ctx, `SELECT COUNT(*) > 0 FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?`,
		[]any{nullIfEmpty(schema), name}, &ok)
	return ok, err
}

// TableSize adds data_length and index_length from
// information_schema.tables, which InnoDB updates from time to time (and
// ANALYZE TABLE at once), so it lags behind recent writes. A missing table
// measures 0.
func (mysqlFamily) TableSize(ctx context.Context, q driver.Tx, table string) (int64, string, error) {
	schema, name := splitTable(table)
	var size int64
	err := q.QueryRow(ctx, `SELECT COALESCE(SUM(data_length + index_length), 0)
FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?`,
		[]any{nullIfEmpty(schema), name}, &size)
	return size, "table and indexes (information_schema.tables, as of InnoDB's last statistics)", err
}
