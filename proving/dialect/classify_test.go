package dialect_test

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lib/pq"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
)

// TestClassify pins what each built-in dialect makes of its database's
// errors, wrapped or not: the numbers that the documentation names as
// conflicts to retry, as lock waits that ran out, as objects that another
// caller of Migrate made meanwhile, and as columns that the table lacks.
func TestClassify(t *testing.T) {
	my := func(n uint16) error { return &mysql.MySQLError{Number: n, Message: "test"} }
	for _, c := range []struct {
		dialect idem.Dialect
		err     error
		want    dialect.ErrorKind
	}{
		{idem.Postgres(), &pq.Error{Code: "40001"}, dialect.ErrorRetry},
		{idem.Postgres(), &pq.Error{Code: "40P01"}, dialect.ErrorRetry},
		{idem.Postgres(), &pq.Error{Code: "55P03"}, dialect.ErrorRetry},
		// Objects that a concurrent Migrate made, and a user's duplicate,
		// which the Store reads as ErrorOther outside Migrate.
		{idem.Postgres(), &pq.Error{Code: "23505"}, dialect.ErrorExists},
		{idem.Postgres(), &pq.Error{Code: "42701"}, dialect.ErrorExists},
		{idem.Postgres(), &pq.Error{Code: "42P07"}, dialect.ErrorExists},
		{idem.MySQL(), my(1050), dialect.ErrorExists},
		{idem.MariaDB(), my(1060), dialect.ErrorExists},
		{idem.TiDB(), my(1061), dialect.ErrorExists},
		{idem.MySQL(), my(1304), dialect.ErrorExists},
		{idem.MySQL(), my(1213), dialect.ErrorRetry},
		{idem.MySQL(), my(1020), dialect.ErrorRetry},
		{idem.MySQL(), my(1205), dialect.ErrorLockTimeout},
		{idem.MySQL(), my(3572), dialect.ErrorLockTimeout},
		{idem.MySQL(), my(1062), dialect.ErrorOther},
		{idem.MySQL(), my(1064), dialect.ErrorOther},
		// TiDB's own.
		{idem.TiDB(), my(8002), dialect.ErrorRetry},
		{idem.TiDB(), my(8005), dialect.ErrorRetry},
		{idem.TiDB(), my(8022), dialect.ErrorRetry},
		{idem.TiDB(), my(8028), dialect.ErrorRetry},
		{idem.TiDB(), my(9007), dialect.ErrorRetry},
		{idem.TiDB(), my(1205), dialect.ErrorLockTimeout},
		{idem.TiDB(), &mysql.MySQLError{Number: 1105, Message: "lock wait timeout"}, dialect.ErrorLockTimeout},
		{idem.TiDB(), &mysql.MySQLError{Number: 1105, Message: "other"}, dialect.ErrorOther},
		{idem.MySQL(), &mysql.MySQLError{Number: 1105, Message: "lock wait timeout"}, dialect.ErrorOther},
		{idem.MariaDB(), my(9007), dialect.ErrorRetry},
		{idem.MariaDB(), my(1205), dialect.ErrorLockTimeout},
		{idem.MySQL(), errors.New("Error 1213: not the driver's type"), dialect.ErrorOther},
		// Vitess passes MySQL's numbers on: the lock wait of the session
		// (1205) and a deadlock. A transaction that vtgate refuses on a
		// second shard (1317) is neither, nor is a query that vttablet
		// killed with its connection (3024, QUERY_TIMEOUT_MS).
		{idem.Vitess(), my(1205), dialect.ErrorLockTimeout},
		{idem.Vitess(), my(1213), dialect.ErrorRetry},
		{idem.Vitess(), my(1317), dialect.ErrorOther},
		{idem.Vitess(), my(3024), dialect.ErrorOther},
		// A column that the table lacks: undefined_column from lib/pq and
		// pgx, and the MySQL family's unknown column (1054).
		{idem.Postgres(), &pq.Error{Code: "42703"}, dialect.ErrorMissingColumn},
		{idem.Postgres(), &pgconn.PgError{Code: "42703"}, dialect.ErrorMissingColumn},
		{idem.Postgres(), &pgconn.PgError{Code: "42P01"}, dialect.ErrorOther},
		{idem.MySQL(), my(1054), dialect.ErrorMissingColumn},
		{idem.MariaDB(), my(1054), dialect.ErrorMissingColumn},
		{idem.TiDB(), my(1054), dialect.ErrorMissingColumn},
		{idem.Vitess(), my(1054), dialect.ErrorMissingColumn},
		{idem.MySQL(), my(1146), dialect.ErrorOther},
	} {
		for _, err := range []error{c.err, fmt.Errorf("wrapped: %w", c.err)} {
			if got := c.dialect.Classify(err); got != c.want {
				t.Errorf("%s.Classify(%v) = %v, want %v", c.dialect.Name(), err, got, c.want)
			}
		}
	}

	// SQLite gives a missing column no code of its own, so the errors are
	// the driver's, of statements on a table without the column: its
	// message says "no such column" in a read or an update, and "has no
	// column named" in an insert. A missing table is no missing column.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "classify.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE t (key BLOB PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		stmt, says string
		want       dialect.ErrorKind
	}{
		{`SELECT shard_key FROM t`, "no such column", dialect.ErrorMissingColumn},
		{`UPDATE t SET shard_key = 1`, "no such column", dialect.ErrorMissingColumn},
		{`INSERT INTO t (shard_key, key) VALUES (1, x'00')`, "has no column named", dialect.ErrorMissingColumn},
		{`SELECT key FROM missing`, "no such table", dialect.ErrorOther},
	} {
		_, err := db.Exec(c.stmt)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Fatalf("%s: %v, want an error that says %q", c.stmt, err, c.says)
		}
		for _, err := range []error{err, fmt.Errorf("wrapped: %w", err)} {
			if got := idem.SQLite().Classify(err); got != c.want {
				t.Errorf("sqlite.Classify(%v) = %v, want %v", err, got, c.want)
			}
		}
	}
}

// numberedError reports a MySQL server error number through a method, as
// an error of a package that does not import the driver does.
type numberedError uint16

func (e numberedError) Error() string            { return fmt.Sprintf("Error %d", uint16(e)) }
func (e numberedError) MySQLErrorNumber() uint16 { return uint16(e) }

// TestClassifyMySQLErrorNumber shows that the MySQL family reads the number
// of an error that reports it through MySQLErrorNumber, wrapped or not, as
// it reads the driver's, and that the other families do not.
func TestClassifyMySQLErrorNumber(t *testing.T) {
	for _, d := range []idem.Dialect{idem.MySQL(), idem.MariaDB(), idem.TiDB()} {
		for _, c := range []struct {
			err  error
			want dialect.ErrorKind
		}{
			{numberedError(1213), dialect.ErrorRetry},
			{fmt.Errorf("claim: %w", numberedError(1213)), dialect.ErrorRetry},
			{numberedError(1205), dialect.ErrorLockTimeout},
			{numberedError(1050), dialect.ErrorExists},
			{numberedError(1062), dialect.ErrorOther},
		} {
			if got := d.Classify(c.err); got != c.want {
				t.Errorf("%s: Classify(%v) = %v, want %v", d.Name(), c.err, got, c.want)
			}
		}
	}
	for _, d := range []idem.Dialect{idem.Postgres(), idem.SQLite()} {
		if got := d.Classify(numberedError(1213)); got != dialect.ErrorOther {
			t.Errorf("%s: Classify of a MySQL number = %v, want ErrorOther", d.Name(), got)
		}
	}
}

// TestPostgresHintPreparedStatements shows that the PostgreSQL dialect
// explains both errors of a driver's prepared statements behind a pooler in
// transaction mode, from lib/pq and from pgx, wrapped or not, and leaves
// other errors of PostgreSQL's without a hint.
func TestPostgresHintPreparedStatements(t *testing.T) {
	h := idem.Postgres().(dialect.Hinter)
	for _, err := range []error{
		&pq.Error{Code: "42P05"},
		&pq.Error{Code: "26000"},
		&pgconn.PgError{Code: "42P05"},
		fmt.Errorf("claim: %w", &pgconn.PgError{Code: "26000"}),
	} {
		if hint := h.Hint(err); !strings.Contains(hint, "default_query_exec_mode=exec") {
			t.Errorf("Hint(%v) = %q, want one that names default_query_exec_mode=exec", err, hint)
		}
	}
	if hint := h.Hint(&pgconn.PgError{Code: "40001"}); hint != "" {
		t.Errorf("Hint(40001) = %q, want none", hint)
	}
}
