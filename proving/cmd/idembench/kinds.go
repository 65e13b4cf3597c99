package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// kind is one database that idembench can measure, under its -db name, and
// everything it does differently there.
type kind struct {
	name    string
	dialect idem.Dialect
	// env names the variable that holds the server's DSN. A kind without
	// one is a database file of the run's own, at fileDSN in the run's
	// temporary directory, with durable commits or not.
	env     string
	fileDSN func(dir string, durable bool) string
	// settings are the driver settings the database can be measured with,
	// which -drivers chooses from and the settings scenario compares; main
	// is the key of the one -drivers main (the default) chooses.
	main     string
	settings []setting
	// orders creates the effect table (%s is its name) and insert adds a row.
	orders, insert string
	// load fills the idem table %s with n live keys (when expires is
	// false) or n expired ones, numbered from 1.
	load func(ctx context.Context, db *sql.DB, table string, n int, expired bool) error
	// conns caps the connections; 0 means one per client. SQLite has one
	// writer at a time, and its clients queue best for one connection in
	// database/sql's pool rather than in its busy handler, which sleeps.
	conns int
	// bigTable is whether the big table scenario runs: on the servers,
	// whose tables outgrow their caches.
	bigTable bool
	// analyze, when set, brings up to date the statistics from which the
	// database tells a table's size (%s is the table).
	analyze string
	// innodb is whether the server counts InnoDB's row lock waits.
	innodb bool
	// mysql is whether statements are spelled the MySQL way: ? for every
	// parameter, names quoted with backticks, INSERT IGNORE and ON
	// DUPLICATE KEY UPDATE. Otherwise they are spelled as PostgreSQL and
	// SQLite share them, with numbered parameters ($1 or ?1, see param).
	mysql bool
	param string
	// commits makes the switch between fast and durable commits (see
	// commits.go) of the database behind dsn, opened with driver.
	commits func(ctx context.Context, driver, dsn string) (commitSwitch, error)
}

// ph returns the placeholder of the i-th parameter, from 1.
func (k *kind) ph(i int) string {
	if k.mysql {
		return "?"
	}
	return k.param + strconv.Itoa(i)
}

// phs returns the placeholders of parameters 1 to n, comma-separated.
func (k *kind) phs(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = k.ph(i + 1)
	}
	return strings.Join(parts, ", ")
}

// quote quotes a table or column name.
func (k *kind) quote(name string) string {
	if k.mysql {
		return "`" + name + "`"
	}
	return `"` + name + `"`
}

// setting is one driver, and a parameter added to the DSN ("" for none).
// key names it in -drivers, name in the output.
//
// A native setting measures idempgx on a pgx pool (native.go) beside idem
// on database/sql, both on the pgx driver: driver is then the database/sql
// driver of its "sql" sides and of the tables' set-up, and the pool opens
// the same DSN.
type setting struct {
	key, name, driver, param string
	native                   bool
}

// The MySQL family shares its table, driver settings and loader.
const (
	mysqlOrders = `CREATE TABLE %s (id BIGINT AUTO_INCREMENT PRIMARY KEY, k VARBINARY(512) NOT NULL, item BIGINT NOT NULL, qty INT NOT NULL) ENGINE=InnoDB`
	mysqlInsert = `INSERT INTO %s (k, item, qty) VALUES (?, ?, ?)`
)

func mysqlKind(name string, d idem.Dialect, env string, load func(context.Context, *sql.DB, string, int, bool) error) kind {
	return kind{
		name: name, dialect: d, env: env,
		main: "interpolate",
		settings: []setting{
			{key: "default", name: name + " (default DSN)", driver: "mysql"},
			{key: "interpolate", name: name + " interpolateParams=true", driver: "mysql", param: "interpolateParams=true"},
			{key: "foundrows", name: name + " clientFoundRows=true", driver: "mysql", param: "clientFoundRows=true"},
			{key: "multistatements", name: name + " multiStatements=true", driver: "mysql", param: "multiStatements=true"},
			// The Store's default lock timeout as the session's own: the
			// MySQL dialect's claim then leaves the session's as it is.
			{key: "lockwait", name: name + " innodb_lock_wait_timeout=1", driver: "mysql", param: "innodb_lock_wait_timeout=1"},
		},
		orders: mysqlOrders, insert: mysqlInsert, load: load,
		bigTable: true,
		// information_schema reports InnoDB's statistics, which ANALYZE
		// brings up to date.
		analyze: "ANALYZE TABLE %s",
		innodb:  true,
		mysql:   true,
		commits: newInnoDBCommits,
	}
}

// kinds are the databases idembench knows, in the order of the default -db.
var kinds = []kind{
	{
		name:    "sqlite",
		dialect: idem.SQLite(),
		fileDSN: func(dir string, durable bool) string {
			sync := "NORMAL"
			if durable {
				sync = "FULL"
			}
			return "file:" + filepath.Join(dir, "idembench.db") +
				"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")"
		},
		main:     "sqlite",
		settings: []setting{{key: "sqlite", name: "sqlite", driver: "sqlite"}},
		orders:   `CREATE TABLE %s (id INTEGER PRIMARY KEY, k BLOB NOT NULL, item INTEGER NOT NULL, qty INTEGER NOT NULL)`,
		insert:   `INSERT INTO %s (k, item, qty) VALUES (?, ?, ?)`,
		load:     loadSQLite,
		conns:    1,
		param:    "?",
		commits:  newSQLiteCommits,
	},
	{
		name:    "postgres",
		dialect: idem.Postgres(),
		env:     dbtest.EnvPostgres,
		main:    "pgx",
		settings: []setting{
			{key: "pq", name: "postgres/pq", driver: "postgres"},
			{key: "pq-binary", name: "postgres/pq binary_parameters=yes", driver: "postgres", param: "binary_parameters=yes"},
			{key: "pgx", name: "postgres/pgx", driver: "pgx"},
			{key: "pgx-exec", name: "postgres/pgx exec", driver: "pgx", param: "default_query_exec_mode=exec"},
			{key: "pgx-simple", name: "postgres/pgx simple_protocol", driver: "pgx", param: "default_query_exec_mode=simple_protocol"},
			{key: "pgx-native", name: "postgres/pgx native", driver: "pgx", native: true},
		},
		orders:   `CREATE TABLE %s (id bigserial PRIMARY KEY, k bytea NOT NULL, item bigint NOT NULL, qty int NOT NULL)`,
		insert:   `INSERT INTO %s (k, item, qty) VALUES ($1, $2, $3)`,
		load:     loadPostgres,
		bigTable: true,
		param:    "$",
		commits:  newPostgresCommits,
	},
	mysqlKind("mariadb", idem.MariaDB(), dbtest.EnvMariaDB, loadMariaDB),
	mysqlKind("mariadb-mysql", idem.MySQL(), dbtest.EnvMariaDB, loadMariaDB),
	mysqlKind("mysql", idem.MySQL(), dbtest.EnvMySQL, loadMySQL),
	tidbKind(),
}

// tidbKind is TiDB, which scripts/test starts only when asked: its commits
// are TiKV's, which idembench does not switch, and it has no big table
// scenario.
func tidbKind() kind {
	k := mysqlKind("tidb", idem.TiDB(), dbtest.EnvTiDB, loadMySQL)
	k.bigTable, k.innodb, k.analyze = false, false, ""
	k.commits = newTiDBCommits
	return k
}

func kindNames() []string {
	var names []string
	for _, k := range kinds {
		names = append(names, k.name)
	}
	return names
}

func lookupKind(name string) *kind {
	for i := range kinds {
		if kinds[i].name == name {
			return &kinds[i]
		}
	}
	return nil
}

func (k *kind) setting(key string) (setting, bool) {
	for _, s := range k.settings {
		if s.key == key {
			return s, true
		}
	}
	return setting{}, false
}

// settingKeys lists the keys of the driver settings, once each.
func settingKeys() []string {
	var keys []string
	for _, k := range kinds {
		for _, s := range k.settings {
			if !slices.Contains(keys, s.key) {
				keys = append(keys, s.key)
			}
		}
	}
	return keys
}

// driverNames lists what -drivers accepts.
func driverNames() []string {
	names := append([]string{"main", "all"}, settingKeys()...)
	for _, k := range kinds {
		for _, s := range k.settings {
			names = append(names, k.name+"/"+s.key)
		}
	}
	return names
}

// checkDrivers reports the first entry of -drivers that names no setting.
func checkDrivers(list []string) error {
	names := driverNames()
	for _, s := range list {
		if !slices.Contains(names, s) {
			return fmt.Errorf("unknown driver setting %q: want main, all, or one of %s", s, strings.Join(names[2:], ", "))
		}
	}
	return nil
}

// pick returns the driver settings of -drivers that apply to k, in k's
// order: "main" is k's main setting, "all" every setting, a key such as
// "pq" the setting of that key in every database that has one, and
// "postgres/pq" that setting of that database alone. A database none of
// whose settings is named gets its main setting.
func (k *kind) pick(list []string) []setting {
	var out []setting
	for _, s := range k.settings {
		for _, want := range list {
			if want == "all" || want == s.key || want == k.name+"/"+s.key || want == "main" && s.key == k.main {
				out = append(out, s)
				break
			}
		}
	}
	if len(out) == 0 {
		s, _ := k.setting(k.main)
		out = append(out, s)
	}
	return out
}

// database is one database and driver setting under test, with its commit
// mode.
type database struct {
	*kind
	name   string // of the driver setting
	driver string
	dsn    string
	commit string // commitFast or commitDurable
	native bool   // the setting's, see setting
}

// serverDSN returns the DSN of the server's variable, or of the file in
// dir; ok is false when the variable is not set.
func (k *kind) serverDSN(dir string) (dsn string, ok bool) {
	if k.fileDSN != nil {
		return k.fileDSN(dir, false), true
	}
	dsn = os.Getenv(k.env)
	return dsn, dsn != ""
}

// database returns k under driver setting s and commit mode commit; ok is
// false when the server's variable is not set.
func (k *kind) database(dir string, s setting, commit string) (d database, ok bool) {
	dsn, ok := k.serverDSN(dir)
	if !ok {
		return database{}, false
	}
	if k.fileDSN != nil {
		dsn = k.fileDSN(dir, commit == commitDurable)
	}
	if s.param != "" {
		dsn = withParam(dsn, s.param)
	}
	return database{kind: k, name: s.name, driver: s.driver, dsn: dsn, commit: commit, native: s.native}, true
}

func redact(dsn string) string {
	if i := strings.Index(dsn, "idembench"); i >= 0 {
		return "file " + dsn[i:]
	}
	return dsn
}

func withParam(dsn, p string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&" + p
	}
	return dsn + "?" + p
}
