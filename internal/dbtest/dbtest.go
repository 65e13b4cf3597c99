// Package dbtest tells the tests of this module which database servers they
// can reach. scripts/test starts PostgreSQL and MariaDB on loopback and names
// them in two environment variables; without them, the server tests show as
// skipped subtests that say how to run them.
package dbtest

import (
	"os"
	"testing"

	"github.com/idemgo/idem"
)

// The variables that scripts/test sets.
const (
	EnvPostgres = "IDEM_POSTGRES_DSN" // postgres://user@host:port/db?sslmode=disable
	EnvMySQL    = "IDEM_MYSQL_DSN"    // user:password@tcp(host:port)/db
)

// Server is a database server, and a driver to reach it with.
type Server struct {
	Name    string // the subtest's name, such as "postgres/pgx"
	Dialect idem.Dialect
	Driver  string // the database/sql driver's name
	DSN     string
}

// Servers lists the servers whose variables are set: PostgreSQL through
// lib/pq and through pgx, and MariaDB.
func Servers() []Server {
	var ss []Server
	if dsn := os.Getenv(EnvPostgres); dsn != "" {
		ss = append(ss,
			Server{Name: "postgres/pq", Dialect: idem.Postgres(), Driver: "postgres", DSN: dsn},
			Server{Name: "postgres/pgx", Dialect: idem.Postgres(), Driver: "pgx", DSN: dsn})
	}
	if dsn := os.Getenv(EnvMySQL); dsn != "" {
		ss = append(ss, Server{Name: "mariadb", Dialect: idem.MySQL(), Driver: "mysql", DSN: dsn})
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
	for _, s := range []struct{ name, env string }{{"postgres", EnvPostgres}, {"mariadb", EnvMySQL}} {
		if os.Getenv(s.env) == "" {
			us = append(us, Unreachable{s.name, s.env + " is not set: run scripts/test, which starts PostgreSQL and MariaDB and runs every test"})
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
