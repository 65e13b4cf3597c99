package idem_test

import (
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/lib/pq"
	"modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// target is one database and driver that the contract runs against.
type target = dbtest.Target

// env is one test's database, store and effect table, all dropped at the
// end, and the target they are on.
type env struct {
	*dbtest.Env
	tg target
}

// setup opens tg, makes a store on a table of its own with opts, migrates it,
// and creates an effect table.
func setup(t *testing.T, tg target, opts ...idem.Option) *env {
	t.Helper()
	return &env{Env: tg.Setup(t, opts...), tg: tg}
}

// isDriverError reports whether err wraps the driver's own error type.
func isDriverError(err error) bool {
	var (
		pqErr  *pq.Error
		pgxErr *pgconn.PgError
		myErr  *mysql.MySQLError
		sqlErr *sqlite.Error
	)
	return errors.As(err, &pqErr) || errors.As(err, &pgxErr) || errors.As(err, &myErr) || errors.As(err, &sqlErr)
}
