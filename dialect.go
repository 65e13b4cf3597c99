package idem

import "github.com/idemgo/idem/dialect"

// Dialect is what a Store needs to know about one database family: the SQL
// of its statements and the meaning of its errors. Its contract is in
// package dialect, with the built-in dialects, which the constructors below
// return; a dialect for another database implements it in a package of its
// own (docs/dialects.md).
type Dialect = dialect.Dialect

// Postgres returns the dialect of PostgreSQL 12 or later, for lib/pq and for
// pgx (through its database/sql driver, or package idempgx): see
// dialect.Postgres.
func Postgres() Dialect { return dialect.Postgres() }

// MySQL returns the dialect of MySQL 8.0.29 or later, which also runs on
// MariaDB 10.6 or later, for github.com/go-sql-driver/mysql: see
// dialect.MySQL.
func MySQL() Dialect { return dialect.MySQL() }

// MariaDB returns the dialect of MariaDB 10.5 or later, for
// github.com/go-sql-driver/mysql: see dialect.MariaDB.
func MariaDB() Dialect { return dialect.MariaDB() }

// TiDB returns the dialect of TiDB, for github.com/go-sql-driver/mysql: see
// dialect.TiDB.
func TiDB() Dialect { return dialect.TiDB() }

// Vitess returns the dialect of MySQL behind Vitess's vtgate, on a sharded
// keyspace, for github.com/go-sql-driver/mysql: see dialect.Vitess.
func Vitess() Dialect { return dialect.Vitess() }

// SQLite returns the dialect of SQLite 3.35 or later, for modernc.org/sqlite:
// see dialect.SQLite.
func SQLite() Dialect { return dialect.SQLite() }
