// Package dbtest is what the tests of this module share about databases: the
// servers they can reach (this file), the targets they run against, SQLite
// and those servers (target.go), and each test's store and effect table
// (env.go, effects.go). scripts/test starts PostgreSQL, MariaDB and MySQL on
// loopback, and PgBouncer in front of the PostgreSQL (pgbouncer.go), and
// names them in environment variables; without them, the server tests show
// as skipped subtests that say how to run them.
//
// Nothing here imports a database driver: each test package imports those
// that its targets name. Package idemtest, which users import in their own
// tests, makes its tables itself and imports nothing of this package.
package dbtest

import (
	"os"
	"testing"

	"github.com/idemgo/idem"
)

// The variables that scripts/test sets.
const (
	EnvPostgres = "IDEM_POSTGRES_DSN" // postgres://user@host:port/db?sslmode=disable
	EnvMariaDB  = "IDEM_MARIADB_DSN"  // user:password@tcp(host:port)/db
	EnvMySQL    = "IDEM_MYSQL_DSN"    // user:password@tcp(host:port)/db, Oracle MySQL
)

// Server is a database server, and a driver to reach it with.
type Server struct {
	Name    string // the subtest's name, such as "postgres/pgx"
	Family  string // "postgres" or "mysql" (MySQL, MariaDB, TiDB): what SQL the tests may send it
	Dialect idem.Dialect
	Driver  string // the database/sql driver's name
	DSN     string
}

// Servers lists the servers whose variables are set: PostgreSQL through
// lib/pq and through pgx, MariaDB through the MariaDB and the MySQL dialect,
// and MySQL.
func Servers() []Server {
	var ss []Server
	if dsn := os.Getenv(EnvPostgres); dsn != "" {
		ss = append(ss,
			Server{Name: "postgres/pq", Family: "postgres", Dialect: idem.Postgres(), Driver: "postgres", DSN: dsn},
			Server{Name: "postgres/pgx", Family: "postgres", Dialect: idem.Postgres(), Driver: "pgx", DSN: dsn})
	}
	if dsn := os.Getenv(EnvMariaDB); dsn != "" {
		ss = append(ss,
			Server{Name: "mariadb", Family: "mysql", Dialect: idem.MariaDB(), Driver: "mysql", DSN: dsn},
			Server{Name: "mariadb/MySQL", Family: "mysql", Dialect: idem.MySQL(), Driver: "mysql", DSN: dsn})
	}
	if dsn := os.Getenv(EnvMySQL); dsn != "" {
		ss = append(ss, Server{Name: "mysql", Family: "mysql", Dialect: idem.MySQL(), Driver: "mysql", DSN: dsn})
	}
	return ss
}

// Unreachable is a server whose variable is not set, and why it is
// skipped.
type Unreachable struct {
	Name, Reason string
}

// Missing lists the servers whose variables are not set, for tests and
// benchmarks to show as skipped, with a reason that says how to run them.
func Missing() []Unreachable {
	var us []Unreachable
	for _, s := range []struct{ name, env string }{{"postgres", EnvPostgres}, {"mariadb", EnvMariaDB}, {"mysql", EnvMySQL}} {
		if os.Getenv(s.env) == "" {
			us = append(us, Unreachable{s.name, s.env + " is not set: run scripts/test, which starts PostgreSQL, MariaDB and MySQL and runs every test"})
		}
	}
	return us
}

// SkipMissing adds to t a skipped subtest for each server of Missing.
func SkipMissing(t *testing.T) {
	t.Helper()
	for _, u := range Missing() {
		t.Run(u.Name, func(t *testing.T) { t.Skip(u.Reason) })
	}
}
