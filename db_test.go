package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/lib/pq"
	"modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/dbtest"
)

// target is one database and driver that the contract runs against.
type target = dbtest.Target

// targets lists every database the tests can reach, as dbtest.Targets does,
// and each server of the MySQL family a second time with the driver
// settings that change what the server is sent and what RowsAffected
// counts: they must not change any outcome.
func targets() []target {
	var ts []target
	for _, tg := range dbtest.Targets() {
		ts = append(ts, tg)
		if tg.Family == "mysql" {
			settings := withParams(tg, "interpolateParams=true&clientFoundRows=true&multiStatements=true")
			settings.Name += "/interpolate+foundrows+multi"
			ts = append(ts, settings)
		}
	}
	return ts
}

// withParams returns tg with params added to the query string of its
// go-sql-driver/mysql DSN.
func withParams(tg target, params string) target {
	dsn := tg.DSN
	tg.DSN = func(t testing.TB) string { return dbtest.WithParams(dsn(t), params) }
	return tg
}

// forEach runs f against every target as a subtest, and shows each server
// it cannot reach as a skipped subtest that says how to reach it.
func forEach(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	dbtest.ForEach(t, targets(), f)
}

// forEachWithTiDB is forEach, with TiDB in both its transaction modes after
// the other targets: for the tests that show the TiDB dialect's contract.
func forEachWithTiDB(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	forEach(t, f)
	for _, tg := range dbtest.TiDBTargets() {
		t.Run(tg.Name, func(t *testing.T) { f(t, tg) })
	}
	dbtest.SkipMissingTiDB(t)
}

// forEachVitess runs f against Vitess's vtgate, on its sharded keyspace,
// or shows it as skipped: for the tests that show the Vitess dialect's
// contract.
func forEachVitess(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	for _, tg := range dbtest.VitessTargets() {
		t.Run(tg.Name, func(t *testing.T) { f(t, tg) })
	}
	dbtest.SkipMissingVitess(t)
}

// vitessWithSettings is the Vitess target, and the same with the driver
// settings that targets adds for the MySQL family: they must not change
// any outcome through vtgate either.
func vitessWithSettings() []target {
	var ts []target
	for _, tg := range dbtest.VitessTargets() {
		settings := withParams(tg, "interpolateParams=true&clientFoundRows=true&multiStatements=true")
		settings.Name += "/interpolate+foundrows+multi"
		ts = append(ts, tg, settings)
	}
	return ts
}

// forEachPooled is forEachWithTiDB, with PostgreSQL behind PgBouncer after
// the other targets, through lib/pq and pgx: for the tests that show idem
// behind a pooler in transaction mode.
func forEachPooled(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	forEachWithTiDB(t, f)
	for _, tg := range dbtest.PgBouncerTargets() {
		t.Run(tg.Name, func(t *testing.T) { f(t, tg) })
	}
	dbtest.SkipMissingPgBouncer(t)
}

// forEachCitus runs f on the Citus targets alone, or shows them skipped.
func forEachCitus(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	for _, tg := range dbtest.CitusTargets() {
		t.Run(tg.Name, func(t *testing.T) { f(t, tg) })
	}
	dbtest.SkipMissingCitus(t)
}

// forEachRunTarget is forEachWithTiDB for the tests of multi-step
// requests, without TiDB's optimistic target: it wraps idem.TiDB() in a
// dialect of the tests' own, and a dialect from outside the package has no
// statements for them (ErrNoSteps, TestRunInvalid).
func forEachRunTarget(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	forEachWithTiDB(t, func(t *testing.T, tg target) {
		if strings.HasSuffix(tg.Name, "/optimistic") {
			t.Skip("a wrapped dialect has no multi-step requests")
		}
		f(t, tg)
	})
}

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

// mustNotRun is a Func that fails the test if it runs.
func mustNotRun(t *testing.T) idem.Func {
	return func(context.Context, *sql.Tx) (idem.Response, error) {
		t.Error("fn ran, but it must not")
		return idem.Response{}, errors.New("fn must not run")
	}
}
