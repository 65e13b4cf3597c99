package idem_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"path/filepath"
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
type target struct {
	name    string
	dialect idem.Dialect
	driver  string
	// dsn returns the data source for a test: the server's, or a new
	// SQLite file.
	dsn func(t *testing.T) string
	// wrap, when set, puts a connector of the test's own around the
	// driver's connections.
	wrap func(base driver.Driver, dsn string) driver.Connector
	// effectDDL creates an effect table with columns k (the key) and note,
	// and insertEffect adds a row to it; both use %s for the table name.
	effectDDL, insertEffect string
}

// open returns a database for t, closed at the end of t.
func (tg target) open(t *testing.T) *sql.DB {
	t.Helper()
	db, _ := tg.openDSN(t)
	return db
}

// openDSN is open, and also returns the data source it opened.
func (tg target) openDSN(t *testing.T) (*sql.DB, string) {
	t.Helper()
	dsn := tg.dsn(t)
	db, err := sql.Open(tg.driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if tg.wrap != nil {
		db = sql.OpenDB(tg.wrap(db.Driver(), dsn))
	}
	t.Cleanup(func() { db.Close() })
	return db, dsn
}

// targets lists every database the tests can reach: SQLite always, the
// servers when their variables are set.
func targets() []target {
	ts := []target{sqliteTarget("")}
	for _, srv := range dbtest.Servers() {
		tg := target{name: srv.Name, dialect: srv.Dialect, driver: srv.Driver, dsn: func(*testing.T) string { return srv.DSN }}
		switch srv.Dialect.Name() {
		case "postgres":
			tg.effectDDL = `CREATE TABLE %s (k bytea NOT NULL, note text NOT NULL)`
			tg.insertEffect = `INSERT INTO %s (k, note) VALUES ($1, $2)`
			ts = append(ts, tg)
		case "mysql":
			tg.effectDDL = `CREATE TABLE %s (k VARBINARY(512) NOT NULL, note TEXT NOT NULL) ENGINE=InnoDB`
			tg.insertEffect = `INSERT INTO %s (k, note) VALUES (?, ?)`
			// The driver settings that change what the server is sent and
			// what RowsAffected counts must not change any outcome.
			settings := tg
			settings.name += "/interpolate+foundrows"
			settings.dsn = func(*testing.T) string {
				return withParams(srv.DSN, "interpolateParams=true&clientFoundRows=true")
			}
			ts = append(ts, tg, settings)
		}
	}
	return ts
}

// withParams adds params to the query string of a go-sql-driver/mysql DSN.
func withParams(dsn, params string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&" + params
	}
	return dsn + "?" + params
}

// forEach runs f against every target as a subtest, and shows each server
// it cannot reach as a skipped subtest that says how to reach it.
func forEach(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) { f(t, tg) })
	}
	dbtest.SkipMissing(t)
}

// sqliteTarget opens a fresh database file per test, with the DSN the
// documentation asks for unless params says otherwise. Its busy timeout,
// 10 s, is how long a transaction waits at BEGIN for the write lock. The
// tests that hold the lock on purpose release it within 300 ms, so a waiter
// gets it with seconds to spare on a loaded machine; where many writers
// queue (the Torture property), SQLite's busy handler, which is no queue, may
// still starve one past it, and the error it then gets is a conflict that the
// test counts as one.
func sqliteTarget(params string) target {
	if params == "" {
		params = "_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	}
	return target{
		name:    "sqlite",
		dialect: idem.SQLite(),
		driver:  "sqlite",
		dsn: func(t *testing.T) string {
			return "file:" + filepath.Join(t.TempDir(), "idem.db") + "?" + params
		},
		effectDDL:    `CREATE TABLE %s (k BLOB NOT NULL, note TEXT NOT NULL)`,
		insertEffect: `INSERT INTO %s (k, note) VALUES (?, ?)`,
	}
}

// env is one test's database, store and effect table, all dropped at the end.
type env struct {
	tg      target
	db      *sql.DB
	dsn     string // what db was opened with
	store   *idem.Store
	table   string // the store's table
	effects string // the effect table
}

// setup opens tg, makes a store on a table of its own with opts, migrates it,
// and creates an effect table.
func setup(t *testing.T, tg target, opts ...idem.Option) *env {
	t.Helper()
	db, dsn := tg.openDSN(t)
	suffix := randomName()
	e := &env{tg: tg, db: db, dsn: dsn, table: "idem_" + suffix, effects: "effects_" + suffix}
	store, err := idem.New(tg.dialect, append([]idem.Option{idem.WithTable(e.table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	ctx := context.Background()
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, sprintf(tg.effectDDL, e.effects)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, table := range []string{e.table, e.effects} {
			if _, err := db.ExecContext(context.Background(), "DROP TABLE "+table); err != nil {
				t.Logf("drop %s: %v", table, err)
			}
		}
	})
	return e
}

func randomName() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

func sprintf(format, table string) string { return strings.ReplaceAll(format, "%s", table) }

// effect returns a Func that inserts one effect row for key and answers resp.
func (e *env) effect(key string, resp idem.Response) idem.Func {
	return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if _, err := tx.ExecContext(ctx, sprintf(e.tg.insertEffect, e.effects), []byte(key), "done"); err != nil {
			return idem.Response{}, err
		}
		return resp, nil
	}
}

// effects counts the effect rows of key.
func (e *env) effectCount(t *testing.T, key string) int {
	t.Helper()
	q := sprintf(`SELECT count(*) FROM %s WHERE k = `, e.effects)
	if e.tg.dialect.Name() == "postgres" {
		q += "$1"
	} else {
		q += "?"
	}
	var n int
	if err := e.db.QueryRowContext(context.Background(), q, []byte(key)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// begin starts a transaction with opts, rolled back at the end of the test
// if still open.
func (e *env) begin(t *testing.T, opts *sql.TxOptions) *sql.Tx {
	t.Helper()
	tx, err := e.db.BeginTx(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

// do runs Do in a transaction of its own, then commits it when commit is
// true and Do succeeded, and rolls it back otherwise.
func (e *env) do(t *testing.T, key string, hash []byte, fn idem.Func, commit bool) (idem.Result, error) {
	t.Helper()
	tx := e.begin(t, nil)
	res, err := e.store.Do(context.Background(), tx, key, hash, fn)
	if err == nil && commit {
		if cerr := tx.Commit(); cerr != nil {
			t.Fatalf("commit: %v", cerr)
		}
	} else if rerr := tx.Rollback(); rerr != nil {
		t.Fatalf("rollback: %v", rerr)
	}
	return res, err
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
