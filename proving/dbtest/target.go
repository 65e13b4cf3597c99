package dbtest

import (
	"database/sql"
	"database/sql/driver"
	"path/filepath"
	"testing"

	"github.com/idemgo/idem"
)

// Target is one database and driver that tests run against.
type Target struct {
	Name    string // the subtest's name, such as "sqlite" or "postgres/pgx"
	Family  string // "postgres", "mysql" (MySQL, MariaDB) or "sqlite": what SQL a test may send it
	Dialect idem.Dialect
	Driver  string // the database/sql driver's name
	// DSN returns the data source for one test: the server's, or a new
	// SQLite file in the test's temporary directory.
	DSN func(t testing.TB) string
	// Wrap, when set, puts a connector of the test's own around the
	// driver's connections.
	Wrap func(base driver.Driver, dsn string) driver.Connector
	// Distributed marks a Citus coordinator: Setup distributes the tables
	// it makes in a database that the target opened (Distribute).
	Distributed bool
}

// Open returns a database for t, closed at the end of t.
func (tg Target) Open(t testing.TB) *sql.DB {
	t.Helper()
	db, _ := tg.OpenDSN(t)
	return db
}

// OpenDSN is Open, and also returns the data source it opened.
func (tg Target) OpenDSN(t testing.TB) (*sql.DB, string) {
	t.Helper()
	dsn := tg.DSN(t)
	db, err := sql.Open(tg.Driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if tg.Wrap != nil {
		base := db.Driver()
		db.Close()
		db = sql.OpenDB(tg.Wrap(base, dsn))
	}
	t.Cleanup(func() { db.Close() })
	if tg.Distributed {
		markDistributed(t, db)
	}
	return db, dsn
}

// Setup opens tg for t and makes its Env there, as Setup does.
func (tg Target) Setup(t testing.TB, opts ...idem.Option) *Env {
	t.Helper()
	db, dsn := tg.OpenDSN(t)
	e := Setup(t, tg.Dialect, db, opts...)
	e.DSN = dsn
	return e
}

// SQLiteParams are the connection settings that SQLite's targets get
// unless a test asks for others: those the documentation asks for, and WAL.
// The busy timeout, 10 s, is how long a transaction waits at BEGIN for the
// write lock. The tests that hold the lock on purpose release it within
// 300 ms, so a waiter gets it with seconds to spare on a loaded machine;
// where many writers queue (the Torture property), SQLite's busy handler,
// which is no queue, may still starve one past it, and the error it then
// gets is a conflict that the test counts as one.
const SQLiteParams = "_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"

// SQLite is the SQLite target: a fresh database file per test, opened with
// params, or with SQLiteParams if params is empty.
func SQLite(params string) Target {
	if params == "" {
		params = SQLiteParams
	}
	return Target{
		Name:    "sqlite",
		Family:  "sqlite",
		Dialect: idem.SQLite(),
		Driver:  "sqlite",
		DSN: func(t testing.TB) string {
			return "file:" + filepath.Join(t.TempDir(), "idem.db") + "?" + params
		},
	}
}

// ServerTargets are the targets of Servers.
func ServerTargets() []Target { return serverTargets(Servers()) }

func serverTargets(servers []Server) []Target {
	var ts []Target
	for _, srv := range servers {
		ts = append(ts, Target{
			Name: srv.Name, Family: srv.Family, Dialect: srv.Dialect, Driver: srv.Driver,
			DSN: func(testing.TB) string { return srv.DSN },
		})
	}
	return ts
}

// Targets lists every database the tests can reach: SQLite always, with
// SQLiteParams, then the servers whose variables are set.
func Targets() []Target {
	return append([]Target{SQLite("")}, ServerTargets()...)
}

// ForEach runs f against each of targets as a subtest, and shows each server
// it cannot reach as a skipped subtest that says how to reach it.
func ForEach(t *testing.T, targets []Target, f func(t *testing.T, tg Target)) {
	t.Helper()
	for _, tg := range targets {
		t.Run(tg.Name, func(t *testing.T) { f(t, tg) })
	}
	SkipMissing(t)
}
