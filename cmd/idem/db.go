package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
)

// The environment variables that stand in for -dsn and -dialect, so that a
// password need not appear on a command line.
const (
	envDSN     = "IDEM_DSN"
	envDialect = "IDEM_DIALECT"
)

// sqliteBusyTimeout is the busy timeout, in milliseconds, added to a SQLite
// DSN that sets none: long enough to wait out the service's own writers.
const sqliteBusyTimeout = 5000

// pingTimeout bounds the first contact with the database, so that a wrong
// host fails in seconds instead of hanging.
const pingTimeout = 15 * time.Second

// dbFlags are the flags that say which database and table a command works on.
type dbFlags struct {
	dsn, dialect, table, driver string
}

// register adds the flags to fs. Commands that do not connect (schema) leave
// out -dsn and -driver.
func (f *dbFlags) register(fs *flag.FlagSet, connects bool, defaultTable string) {
	if connects {
		fs.StringVar(&f.dsn, "dsn", "", fmt.Sprintf("data source name (default $%s); for SQLite, idem adds\n"+
			"_txlock=immediate and _pragma=busy_timeout(%d) unless the DSN sets them", envDSN, sqliteBusyTimeout))
		fs.StringVar(&f.driver, "driver", "", "database/sql driver for postgres: pgx (default) or postgres (lib/pq)")
	}
	fs.StringVar(&f.dialect, "dialect", "", "postgres, mysql (MariaDB) or sqlite (default $"+envDialect+", else inferred from the DSN)")
	fs.StringVar(&f.table, "table", defaultTable, "table of idempotency keys, optionally schema-qualified")
}

// database is a resolved choice of database, driver and table.
type database struct {
	dialect idem.Dialect
	driver  string
	dsn     string // as it is opened: for SQLite, with the settings idem adds
	table   string
}

// resolve turns the flags and the environment into a database. A missing or
// contradictory setting is a usage error. With needDSN false (schema), only
// the dialect and table are resolved.
func (f *dbFlags) resolve(e *env, needDSN bool) (*database, error) {
	dsn := f.dsn
	if dsn == "" {
		dsn = e.getenv(envDSN)
	}
	if needDSN && dsn == "" {
		return nil, usageError("no database: set -dsn or %s", envDSN)
	}
	name := f.dialect
	if name == "" {
		name = e.getenv(envDialect)
	}
	if name == "" {
		if dsn == "" {
			return nil, usageError("no dialect: set -dialect or %s (postgres, mysql or sqlite)", envDialect)
		}
		var err error
		if name, err = inferDialect(dsn); err != nil {
			return nil, err
		}
	}
	d, err := dialectByName(name)
	if err != nil {
		return nil, err
	}
	if _, err := idem.New(d, idem.WithTable(f.table)); err != nil {
		return nil, usageError("bad -table: %s", strings.TrimPrefix(err.Error(), "idem: "))
	}
	db := &database{dialect: d, table: f.table}
	if db.driver, err = driverFor(d, f.driver); err != nil {
		return nil, err
	}
	db.dsn = dsn
	if d.Name() == "sqlite" && dsn != "" {
		db.dsn = sqliteDSN(dsn)
	}
	return db, nil
}

func dialectByName(name string) (idem.Dialect, error) {
	switch strings.ToLower(name) {
	case "postgres", "postgresql":
		return idem.Postgres(), nil
	case "mysql", "mariadb":
		return idem.MySQL(), nil
	case "sqlite", "sqlite3":
		return idem.SQLite(), nil
	}
	return nil, usageError("unknown dialect %q: want postgres, mysql or sqlite", name)
}

// inferDialect guesses the dialect from the form of a DSN. go-sql-driver's
// user:password@tcp(host)/db form is recognised too, since it has nothing
// else in common with the other two.
func inferDialect(dsn string) (string, error) {
	lower := strings.ToLower(dsn)
	path, _, _ := strings.Cut(lower, "?")
	switch {
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return "postgres", nil
	case strings.HasPrefix(lower, "file:"), path == ":memory:",
		strings.HasSuffix(path, ".db"), strings.HasSuffix(path, ".sqlite"), strings.HasSuffix(path, ".sqlite3"):
		return "sqlite", nil
	case strings.Contains(lower, "@tcp("), strings.Contains(lower, "@unix("):
		return "mysql", nil
	}
	return "", usageError("cannot tell the dialect from the DSN: set -dialect or %s (postgres, mysql or sqlite)", envDialect)
}

// driverFor picks the database/sql driver of d. Only PostgreSQL has a choice.
func driverFor(d idem.Dialect, flagValue string) (string, error) {
	switch d.Name() {
	case "postgres":
		switch flagValue {
		case "", "pgx":
			return "pgx", nil
		case "postgres", "pq":
			return "postgres", nil
		}
		return "", usageError("unknown -driver %q for postgres: want pgx or postgres (lib/pq)", flagValue)
	default:
		if flagValue != "" && flagValue != d.Name() {
			return "", usageError("-driver %q does not apply to %s: only postgres has a choice of driver", flagValue, d.Name())
		}
		return d.Name(), nil
	}
}

// sqliteDSN adds to dsn what the SQLite dialect needs and the DSN lacks:
// _txlock=immediate, so that a transaction takes the write lock when it
// begins, and a busy timeout, so that it waits for the lock instead of
// failing at once.
func sqliteDSN(dsn string) string {
	_, query, _ := strings.Cut(dsn, "?")
	q, _ := url.ParseQuery(query)
	var added []string
	if q.Get("_txlock") == "" {
		added = append(added, "_txlock=immediate")
	}
	hasBusy := q.Get("_busy_timeout") != "" || q.Get("_timeout") != ""
	for _, p := range q["_pragma"] {
		hasBusy = hasBusy || strings.HasPrefix(strings.ToLower(strings.TrimSpace(p)), "busy_timeout")
	}
	if !hasBusy {
		added = append(added, fmt.Sprintf("_pragma=busy_timeout(%d)", sqliteBusyTimeout))
	}
	if len(added) == 0 {
		return dsn
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + strings.Join(added, "&")
}

// sqliteFile returns the file a SQLite DSN names, or "" for an in-memory
// database or a form it does not know.
func sqliteFile(dsn string) string {
	name, query, _ := strings.Cut(dsn, "?")
	if q, _ := url.ParseQuery(query); q.Get("mode") == "memory" || q.Get("vfs") != "" {
		return ""
	}
	if rest, ok := strings.CutPrefix(name, "file:"); ok {
		if strings.HasPrefix(rest, "//") {
			u, err := url.Parse(name)
			if err != nil || (u.Host != "" && u.Host != "localhost") {
				return ""
			}
			return u.Path
		}
		p, err := url.PathUnescape(rest)
		if err != nil {
			return ""
		}
		name = p
	}
	if name == "" || name == ":memory:" {
		return ""
	}
	return name
}

// open opens and pings the database. With mustExist, a SQLite file that is
// not there is an error rather than a new empty database: looking at a
// table in a mistyped path should not create the path.
func (d *database) open(ctx context.Context, mustExist bool) (*sql.DB, error) {
	if d.dialect.Name() == "sqlite" && mustExist {
		if f := sqliteFile(d.dsn); f != "" {
			if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("sqlite database %s does not exist: check -dsn", f)
			}
		}
	}
	db, err := sql.Open(d.driver, d.dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s database: %w", d.dialect.Name(), err)
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot reach the %s database (check -dsn): %w", d.dialect.Name(), err)
	}
	return db, nil
}

// store makes the Store for the table.
func (d *database) store(opts ...idem.Option) (*idem.Store, error) {
	return idem.New(d.dialect, append([]idem.Option{idem.WithTable(d.table)}, opts...)...)
}

// quoteName quotes each part of a validated, possibly schema-qualified, name
// as the dialect requires, so that a table named after a reserved word works.
func quoteName(d idem.Dialect, name string) string {
	q := `"`
	if d.Name() == "mysql" {
		q = "`"
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = q + p + q
	}
	return strings.Join(parts, ".")
}

// splitName splits a possibly schema-qualified name into schema and table;
// the schema is "" when the name has none.
func splitName(name string) (schema, table string) {
	if s, t, ok := strings.Cut(name, "."); ok {
		return s, t
	}
	return "", name
}

// tableExists reports whether the table is there, so that a command on a
// database that was never migrated can say so instead of passing on the
// driver's "no such table".
func (d *database) tableExists(ctx context.Context, db *sql.DB) (bool, error) {
	schema, table := splitName(d.table)
	var (
		query string
		args  []any
	)
	switch d.dialect.Name() {
	case "postgres":
		query, args = `SELECT to_regclass($1) IS NOT NULL`, []any{quoteName(d.dialect, d.table)}
	case "mysql":
		query = `SELECT COUNT(*) > 0 FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?`
		args = []any{nullString(schema), table}
	default:
		master := "sqlite_master"
		if schema != "" {
			master = quoteName(d.dialect, schema) + ".sqlite_master"
		}
		query, args = `SELECT COUNT(*) > 0 FROM `+master+` WHERE type = 'table' AND name = ?`, []any{table}
	}
	var ok bool
	if err := db.QueryRowContext(ctx, query, args...).Scan(&ok); err != nil {
		return false, fmt.Errorf("look for table %s: %w", d.table, err)
	}
	return ok, nil
}

// openTable opens the database and checks that the table exists.
func (d *database) openTable(ctx context.Context) (*sql.DB, error) {
	db, err := d.open(ctx, true)
	if err != nil {
		return nil, err
	}
	ok, err := d.tableExists(ctx, db)
	if err == nil && !ok {
		err = fmt.Errorf("table %s does not exist in this %s database: check -table, or create it with idem migrate", d.table, d.dialect.Name())
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// openStore resolves the flags, makes a Store on e's clock, and opens the
// database, whose table must exist: what the commands that read the table
// through a Store need.
func (f *dbFlags) openStore(ctx context.Context, e *env) (*database, *idem.Store, *sql.DB, error) {
	d, err := f.resolve(e, true)
	if err != nil {
		return nil, nil, nil, err
	}
	store, err := d.store(idem.WithClock(e.now))
	if err != nil {
		return nil, nil, nil, err
	}
	db, err := d.openTable(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	return d, store, db, nil
}
