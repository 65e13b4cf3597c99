package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
)

// knownDialect is what the command knows of one dialect it can work with,
// under the name that -dialect and IDEM_DIALECT give it. Everything the
// command does differently for one database is here, so that no code
// elsewhere asks which database it is talking to.
type knownDialect struct {
	name    string   // the -dialect value, lower case
	aliases []string // other -dialect values for it
	about   string   // what it is for, in the help
	dialect func() idem.Dialect
	// drivers are the database/sql drivers that reach the database,
	// the default first.
	drivers []driverChoice
	// quote is the character that quotes a name in its SQL.
	quote byte
	// fixDSN, when set, adds to a DSN the settings the dialect needs.
	fixDSN func(dsn string) string
	// file, when set, returns the file a DSN names: the database is a
	// file, which need not exist yet, and whose name carries no password.
	// It returns "" for an in-memory database.
	file func(dsn string) string
	// title names the database in prose, as the demo does when it shows
	// the database's file.
	title string
	demo  demoSQL
}

// driverChoice is one database/sql driver of a dialect.
type driverChoice struct {
	name    string   // as registered with database/sql
	aliases []string // other -driver values for it
	about   string   // in messages
}

// demoSQL is the SQL of the demo's orders table.
type demoSQL struct {
	// ordersDDL creates the table (%s is its quoted name) with an
	// integer id that the database assigns, idem_key and item.
	ordersDDL string
	// lastInsertID reads the new order's id from the result of the INSERT,
	// for a database whose INSERT cannot return it.
	lastInsertID bool
}

// The MySQL, MariaDB, TiDB and Vitess dialects share the table layout, the
// driver and the demo's SQL.
var (
	mysqlDriver = []driverChoice{{name: "mysql", about: "mysql (go-sql-driver/mysql)"}}
	mysqlDemo   = demoSQL{
		ordersDDL:    `CREATE TABLE IF NOT EXISTS %s (id BIGINT AUTO_INCREMENT PRIMARY KEY, idem_key VARCHAR(512) NOT NULL, item VARCHAR(100) NOT NULL) ENGINE=InnoDB`,
		lastInsertID: true,
	}
)

// knownDialects are the dialects the command knows, in the order the help
// lists them.
var knownDialects = []knownDialect{
	{
		name:    "postgres",
		aliases: []string{"postgresql"},
		about:   "PostgreSQL 12+",
		dialect: idem.Postgres,
		drivers: []driverChoice{
			{name: "pgx", about: "pgx"},
			{name: "postgres", aliases: []string{"pq"}, about: "postgres (lib/pq)"},
		},
		quote: '"',
		title: "PostgreSQL",
		demo: demoSQL{
			ordersDDL: `CREATE TABLE IF NOT EXISTS %s (id bigserial PRIMARY KEY, idem_key text NOT NULL, item text NOT NULL)`,
		},
	},
	{
		name:    "mysql",
		about:   "MySQL 8.0.29+, also MariaDB 10.6+",
		dialect: idem.MySQL,
		drivers: mysqlDriver,
		quote:   '`',
		title:   "MySQL",
		demo:    mysqlDemo,
	},
	{
		name:    "mariadb",
		about:   "MariaDB 10.5+ only; no stored procedure",
		dialect: idem.MariaDB,
		drivers: mysqlDriver,
		quote:   '`',
		title:   "MariaDB",
		demo:    mysqlDemo,
	},
	{
		name:    "tidb",
		about:   "TiDB",
		dialect: idem.TiDB,
		drivers: mysqlDriver,
		quote:   '`',
		title:   "TiDB",
		demo:    mysqlDemo,
	},
	{
		name:    "vitess",
		about:   "Vitess's vtgate, on a keyspace sharded by key",
		dialect: idem.Vitess,
		drivers: mysqlDriver,
		quote:   '`',
		title:   "Vitess",
		demo:    mysqlDemo,
	},
	{
		name:    "sqlite",
		aliases: []string{"sqlite3"},
		about:   "SQLite 3.35+",
		dialect: idem.SQLite,
		drivers: []driverChoice{{name: "sqlite", about: "sqlite (modernc.org/sqlite)"}},
		quote:   '"',
		fixDSN:  sqliteDSN,
		file:    sqliteFile,
		title:   "SQLite",
		demo: demoSQL{
			ordersDDL: `CREATE TABLE IF NOT EXISTS %s (id INTEGER PRIMARY KEY, idem_key TEXT NOT NULL, item TEXT NOT NULL)`,
		},
	},
}

// lookupDialect finds the known dialect that a -dialect value names, in any
// case.
func lookupDialect(name string) (*knownDialect, bool) {
	name = strings.ToLower(name)
	for i := range knownDialects {
		k := &knownDialects[i]
		if k.name == name || slices.Contains(k.aliases, name) {
			return k, true
		}
	}
	return nil, false
}

// dialectNames lists the -dialect values for a message: "a, b or c".
func dialectNames() string {
	var names []string
	for _, k := range knownDialects {
		names = append(names, k.name)
	}
	return orList(names)
}

// dialectHelp describes the -dialect values, for the help: one line each,
// starting with indent.
func dialectHelp(indent string) string {
	width := 0
	for _, k := range knownDialects {
		width = max(width, len(k.name))
	}
	var lines []string
	for _, k := range knownDialects {
		lines = append(lines, fmt.Sprintf("%s%-*s  %s", indent, width, k.name, k.about))
	}
	return strings.Join(lines, "\n")
}

// driverHelp describes the -driver values, for the help: "for postgres: pgx
// (default) or postgres (lib/pq)".
func driverHelp() string {
	var parts []string
	for _, k := range knownDialects {
		if len(k.drivers) < 2 {
			continue
		}
		var abouts []string
		for i, d := range k.drivers {
			if i == 0 {
				abouts = append(abouts, d.about+" (default)")
			} else {
				abouts = append(abouts, d.about)
			}
		}
		parts = append(parts, "for "+k.name+": "+orList(abouts))
	}
	return strings.Join(parts, "; ")
}

// driverChoosers lists the dialects that have a choice of driver.
func driverChoosers() string {
	var names []string
	for _, k := range knownDialects {
		if len(k.drivers) > 1 {
			names = append(names, k.name)
		}
	}
	return orList(names)
}

// orList joins items as "a, b or c".
func orList(items []string) string {
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// driver picks the database/sql driver that -driver names, or the default.
func (k *knownDialect) driver(flagValue string) (string, error) {
	if flagValue == "" {
		return k.drivers[0].name, nil
	}
	for _, d := range k.drivers {
		if d.name == flagValue || slices.Contains(d.aliases, flagValue) {
			return d.name, nil
		}
	}
	if len(k.drivers) == 1 {
		return "", usageError("-driver %q does not apply to %s: only %s has a choice of driver", flagValue, k.name, driverChoosers())
	}
	var abouts []string
	for _, d := range k.drivers {
		abouts = append(abouts, d.about)
	}
	return "", usageError("unknown -driver %q for %s: want %s", flagValue, k.name, orList(abouts))
}

// quoteName quotes each part of a validated, possibly schema-qualified,
// name as the dialect requires, so that a table named after a reserved word
// works.
func (k *knownDialect) quoteName(name string) string {
	return dialect.QuoteTable(name, k.quote)
}
