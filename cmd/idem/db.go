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
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/internal/sqltx"
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
	shardColumn                 string // -shard-column, "" for a table without one
}

// register adds the flags to fs. Commands that do not connect (schema) leave
// out -dsn and -driver.
func (f *dbFlags) register(fs *flag.FlagSet, connects bool, defaultTable string) {
	if connects {
		fs.StringVar(&f.dsn, "dsn", "", fmt.Sprintf("data source name (default $%s); for SQLite, idem adds\n"+
			"_txlock=immediate and _pragma=busy_timeout(%d) unless the DSN sets them", envDSN, sqliteBusyTimeout))
		fs.StringVar(&f.driver, "driver", "", "database/sql driver "+driverHelp())
	}
	fs.StringVar(&f.dialect, "dialect", "", dialectNames()+" (default $"+envDialect+", else inferred from the DSN):\n"+dialectHelp(""))
	fs.StringVar(&f.table, "table", defaultTable, "table of idempotency keys, optionally schema-qualified")
}

// registerShardColumn adds -shard-column, for the commands that make a Store
// of the table: every one but demo, whose table is its own.
func (f *dbFlags) registerShardColumn(fs *flag.FlagSet) {
	fs.StringVar(&f.shardColumn, "shard-column", "", "the `KIND` of the table's shard column, shard_key, for a table made\n"+
		"with idem.WithShardColumn: int64, text(N), bytes(N) or uuid, as the\n"+
		"service gives it; give it whenever the table has one")
}

// shardColumnKind reads -shard-column: the zero ShardKind for a table
// without a shard column (no flag), and a usage error for a kind that
// idem.ParseShardKind does not read.
func shardColumnKind(flag string) (idem.ShardKind, error) {
	if flag == "" {
		return idem.ShardKind{}, nil
	}
	kind, err := idem.ParseShardKind(flag)
	if err != nil {
		return idem.ShardKind{}, usageError("bad -shard-column: %s", strings.TrimPrefix(err.Error(), "idem: "))
	}
	return kind, nil
}

// database is a resolved choice of database, driver and table.
type database struct {
	kind    *knownDialect // what -dialect selected
	dialect idem.Dialect
	driver  string
	dsn     string // as it is opened: with the settings idem adds (kind.fixDSN)
	table   string
	// shardKind is -shard-column's kind, the zero ShardKind for a table
	// without a shard column.
	shardKind idem.ShardKind
}

// sharded reports whether -shard-column gave the table a shard column.
func (d *database) sharded() bool { return d.shardKind.Valid() }

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
			return nil, usageError("no dialect: set -dialect or %s (%s)", envDialect, dialectNames())
		}
		var err error
		if name, err = inferDialect(dsn); err != nil {
			return nil, err
		}
	}
	k, ok := lookupDialect(name)
	if !ok {
		return nil, usageError("unknown dialect %q: want %s", name, dialectNames())
	}
	d := k.dialect()
	if _, err := idem.New(d, idem.WithTable(f.table)); err != nil {
		return nil, usageError("bad -table: %s", strings.TrimPrefix(err.Error(), "idem: "))
	}
	kind, err := shardColumnKind(f.shardColumn)
	if err != nil {
		return nil, err
	}
	if kind.Valid() {
		if _, err := idem.New(d, idem.WithTable(f.table), idem.WithShardColumn(kind)); err != nil {
			return nil, usageError("bad -shard-column: %s", strings.TrimPrefix(err.Error(), "idem: "))
		}
	}
	db := &database{kind: k, dialect: d, table: f.table, dsn: dsn, shardKind: kind}
	if db.driver, err = k.driver(f.driver); err != nil {
		return nil, err
	}
	if k.fixDSN != nil && dsn != "" {
		db.dsn = k.fixDSN(dsn)
	}
	return db, nil
}

// inferDialect guesses the dialect from the form of a DSN, and returns its
// -dialect value. go-sql-driver's user:password@tcp(host)/db form is
// recognised too, since it has nothing else in common with the other two;
// it is mysql, the dialect of the whole MySQL family, since the form does
// not tell MariaDB from MySQL.
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
	return "", usageError("cannot tell the dialect from the DSN: set -dialect or %s (%s)", envDialect, dialectNames())
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

// file returns the file the database is in, or "" when it is not a file
// (a server, or an in-memory database).
func (d *database) file() string {
	if d.kind.file == nil {
		return ""
	}
	return d.kind.file(d.dsn)
}

// open opens and pings the database. With mustExist, a database file that
// is not there is an error rather than a new empty database: looking at a
// table in a mistyped path should not create the path.
func (d *database) open(ctx context.Context, mustExist bool) (*sql.DB, error) {
	if f := d.file(); f != "" && mustExist {
		if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s database %s does not exist: check -dsn", d.dialect.Name(), f)
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

// store makes the Store for the table, with its shard column if -shard-column
// gave one.
func (d *database) store(opts ...idem.Option) (*idem.Store, error) {
	base := []idem.Option{idem.WithTable(d.table)}
	if d.sharded() {
		base = append(base, idem.WithShardColumn(d.shardKind))
	}
	return idem.New(d.dialect, append(base, opts...)...)
}

// quote quotes a validated, possibly schema-qualified, name as the dialect
// requires.
func (d *database) quote(name string) string { return d.kind.quoteName(name) }

// inspector returns the dialect's dialect.TableInspector, which the built-in
// dialects implement; ok is false for a dialect that does not.
func (d *database) inspector() (dialect.TableInspector, bool) {
	ins, ok := d.dialect.(dialect.TableInspector)
	return ins, ok
}

// notInspector says why the command cannot look at the table from outside.
func (d *database) notInspector() string {
	return fmt.Sprintf("the %s dialect does not implement dialect.TableInspector", d.dialect.Name())
}

// tableExists reports whether the table is there, so that a command on a
// database that was never migrated can say so instead of passing on the
// driver's "no such table". known is false when the dialect cannot tell.
func (d *database) tableExists(ctx context.Context, db *sql.DB) (exists, known bool, err error) {
	ins, ok := d.inspector()
	if !ok {
		return false, false, nil
	}
	exists, err = ins.TableExists(ctx, sqltx.Of(db), d.table)
	if err != nil {
		return false, false, fmt.Errorf("look for table %s: %w", d.table, err)
	}
	return exists, true, nil
}

// hasShardColumn reports whether the table has the column shard_key, by
// the dialect's ShardColumnCheck, whose first number counts the columns of
// that name whatever their type; a dialect without shard columns makes no
// table with one. Without -shard-column, the command's statements name a
// record by its key alone, and on a table with a shard column they would
// read or change the records of that key under every shard value: the
// command refuses, rather than settle or delete many customers' records at
// once.
func (d *database) hasShardColumn(ctx context.Context, db *sql.DB) (bool, error) {
	sc, ok := d.dialect.(dialect.ShardColumn)
	if !ok {
		return false, nil
	}
	q, _ := sc.ShardColumnCheck(d.table, dialect.ShardKind{Type: dialect.ShardInt64})
	var columns, fitting int
	if err := db.QueryRowContext(ctx, q).Scan(&columns, &fitting); err != nil {
		return false, fmt.Errorf("look for a shard column in table %s: %w", d.table, err)
	}
	return columns > 0, nil
}

// checkShard makes sure that -shard-column says what the table holds: a
// table with a shard column needs it (hasShardColumn), and its kind must be
// the column's (checkShardKind).
func (d *database) checkShard(ctx context.Context, db *sql.DB) error {
	if !d.sharded() {
		has, err := d.hasShardColumn(ctx, db)
		if err != nil {
			return err
		}
		if has {
			return usageError("table %s has a shard column, shard_key: give its kind with -shard-column, as the service's idem.WithShardColumn does", d.table)
		}
		return nil
	}
	return d.checkShardKind(ctx, db)
}

// openTable opens the database and checks that the table exists. Where the
// dialect cannot tell, it says so on stderr and goes on as if the table
// existed.
func (d *database) openTable(ctx context.Context, e *env) (*sql.DB, error) {
	db, err := d.open(ctx, true)
	if err != nil {
		return nil, err
	}
	ok, known, err := d.tableExists(ctx, db)
	switch {
	case err != nil:
	case !known:
		fmt.Fprintf(e.stderr, "idem: not checking that table %s exists: %s\n", d.table, d.notInspector())
	case !ok:
		err = fmt.Errorf("table %s does not exist in this %s database: check -table, or create it with idem migrate", d.table, d.dialect.Name())
	default:
		err = d.checkShard(ctx, db)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// openStore resolves the flags, makes a Store on e's clock, and opens the
// database, whose table must exist: what the commands that read the table
// through a Store need.
func (f *dbFlags) openStore(ctx context.Context, e *env, opts ...idem.Option) (*database, *idem.Store, *sql.DB, error) {
	d, err := f.resolve(e, true)
	if err != nil {
		return nil, nil, nil, err
	}
	store, err := d.store(append([]idem.Option{idem.WithClock(e.now)}, opts...)...)
	if err != nil {
		return nil, nil, nil, err
	}
	db, err := d.openTable(ctx, e)
	if err != nil {
		return nil, nil, nil, err
	}
	return d, store, db, nil
}
