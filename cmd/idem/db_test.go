package main

import (
	"context"
	"database/sql"
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
)

func TestInferDialect(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"postgres://app@db.internal/shop":            "postgres",
		"POSTGRESQL://app@db.internal/shop?ssl=true": "postgres",
		"file:shop.db":                          "sqlite",
		"file::memory:?cache=shared":            "sqlite",
		"/var/lib/shop/keys.db":                 "sqlite",
		"keys.sqlite?_pragma=foreign_keys(1)":   "sqlite",
		"keys.sqlite3":                          "sqlite",
		":memory:":                              "sqlite",
		"app:secret@tcp(db.internal:3306)/shop": "mysql",
		"app@unix(/run/mysqld.sock)/shop":       "mysql",
		"host=db.internal dbname=shop":          "",
		"shop":                                  "",
		"db.internal:5432":                      "",
	} {
		got, err := inferDialect(dsn)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("inferDialect(%q) = %q, %v; want %q", dsn, got, err, want)
		}
	}
}

func TestSQLiteDSN(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, want string
	}{
		{"shop.db", "shop.db?_txlock=immediate&_pragma=busy_timeout(5000)"},
		{"file:shop.db?_pragma=journal_mode(WAL)", "file:shop.db?_pragma=journal_mode(WAL)&_txlock=immediate&_pragma=busy_timeout(5000)"},
		{"shop.db?_txlock=deferred", "shop.db?_txlock=deferred&_pragma=busy_timeout(5000)"},
		{"shop.db?_pragma=busy_timeout(100)", "shop.db?_pragma=busy_timeout(100)&_txlock=immediate"},
		{"shop.db?_busy_timeout=100", "shop.db?_busy_timeout=100&_txlock=immediate"},
		{"shop.db?_txlock=immediate&_pragma=BUSY_TIMEOUT%28100%29", "shop.db?_txlock=immediate&_pragma=BUSY_TIMEOUT%28100%29"},
	} {
		if got := sqliteDSN(c.in); got != c.want {
			t.Errorf("sqliteDSN(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSQLiteFile(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"shop.db":                        "shop.db",
		"/var/shop.db?_txlock=immediate": "/var/shop.db",
		"file:shop.db?mode=rw":           "shop.db",
		"file:my%20shop.db":              "my shop.db",
		"file:///var/shop.db":            "/var/shop.db",
		"file://localhost/var/shop.db":   "/var/shop.db",
		"file://elsewhere/var/shop.db":   "",
		":memory:":                       "",
		"file::memory:":                  "",
		"file:shop?mode=memory":          "",
	} {
		if got := sqliteFile(dsn); got != want {
			t.Errorf("sqliteFile(%q) = %q, want %q", dsn, got, want)
		}
	}
}

// Flags may follow an argument, and after "--" everything is one.
func TestParseFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args      []string
		wantTable string
		wantPos   []string
	}{
		{[]string{"-table", "t", "k"}, "t", []string{"k"}},
		{[]string{"k", "-table", "t"}, "t", []string{"k"}},
		{[]string{"a", "-table", "t", "b"}, "t", []string{"a", "b"}},
		{[]string{"-table", "t", "--", "-k", "-table"}, "t", []string{"-k", "-table"}},
		{[]string{"k", "--", "-x"}, "idempotency_keys", []string{"k", "-x"}},
	} {
		fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
		table := fs.String("table", "idempotency_keys", "")
		pos, err := parseFlags(testEnv(time.Time{}), fs, "", c.args)
		if err != nil || *table != c.wantTable || !slices.Equal(pos, c.wantPos) {
			t.Errorf("parseFlags(%q) = %q, %v with -table %q; want %q with -table %q", c.args, pos, err, *table, c.wantPos, c.wantTable)
		}
	}
}

// -dialect (or IDEM_DIALECT, or the DSN) selects the dialect, its driver,
// what is added to its DSN and how its names are quoted.
func TestDialects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dsn, flag, driver string
		want              idem.Dialect
		wantDriver        string
		wantDSN           string
		wantQuoted        string // of billing.keys
	}{
		{"postgres://db.internal/shop", "", "", idem.Postgres(), "pgx", "postgres://db.internal/shop", `"billing"."keys"`},
		{"host=db.internal", "postgresql", "pq", idem.Postgres(), "postgres", "host=db.internal", `"billing"."keys"`},
		{"app:secret@tcp(db.internal:3306)/shop", "", "", idem.MySQL(), "mysql", "app:secret@tcp(db.internal:3306)/shop", "`billing`.`keys`"},
		{"app:secret@tcp(db.internal:3306)/shop", "mysql", "mysql", idem.MySQL(), "mysql", "app:secret@tcp(db.internal:3306)/shop", "`billing`.`keys`"},
		{"app:secret@tcp(db.internal:3306)/shop", "MariaDB", "", idem.MariaDB(), "mysql", "app:secret@tcp(db.internal:3306)/shop", "`billing`.`keys`"},
		{"app:secret@tcp(db.internal:3306)/shop", "mariadb", "mysql", idem.MariaDB(), "mysql", "app:secret@tcp(db.internal:3306)/shop", "`billing`.`keys`"},
		{"app:secret@tcp(db.internal:3306)/shop", "tidb", "", idem.TiDB(), "mysql", "app:secret@tcp(db.internal:3306)/shop", "`billing`.`keys`"},
		{"app:secret@tcp(vtgate.internal:3306)/shop", "vitess", "", idem.Vitess(), "mysql", "app:secret@tcp(vtgate.internal:3306)/shop", "`billing`.`keys`"},
		{"app:secret@tcp(vtgate.internal:3306)/shop", "Vitess", "mysql", idem.Vitess(), "mysql", "app:secret@tcp(vtgate.internal:3306)/shop", "`billing`.`keys`"},
		{"shop.db", "", "", idem.SQLite(), "sqlite", "shop.db?_txlock=immediate&_pragma=busy_timeout(5000)", `"billing"."keys"`},
		{"shop", "sqlite3", "sqlite", idem.SQLite(), "sqlite", "shop?_txlock=immediate&_pragma=busy_timeout(5000)", `"billing"."keys"`},
	} {
		f := dbFlags{dsn: c.dsn, dialect: c.flag, driver: c.driver, table: "billing.keys"}
		d, err := f.resolve(testEnv(time.Time{}), true)
		if err != nil {
			t.Errorf("-dsn %s -dialect %q -driver %q: %v", c.dsn, c.flag, c.driver, err)
			continue
		}
		if d.dialect != c.want || d.driver != c.wantDriver || d.dsn != c.wantDSN || d.quote(d.table) != c.wantQuoted {
			t.Errorf("-dsn %s -dialect %q -driver %q: dialect %s, driver %s, DSN %s, table %s; want %s, %s, %s, %s",
				c.dsn, c.flag, c.driver, d.dialect.Name(), d.driver, d.dsn, d.quote(d.table),
				c.want.Name(), c.wantDriver, c.wantDSN, c.wantQuoted)
		}
	}

	// Every dialect the command knows can look at its table from outside,
	// and is named in the help.
	usage := runCmd(t, "-h").stdout
	for _, k := range knownDialects {
		if _, ok := k.dialect().(dialect.TableInspector); !ok {
			t.Errorf("the %s dialect does not implement dialect.TableInspector", k.name)
		}
		if !strings.Contains(usage, "\n              "+k.name+" ") {
			t.Errorf("idem -h does not describe -dialect %s:\n%s", k.name, usage)
		}
	}
	r := runCmd(t, "schema", "-dialect", "oracle")
	if want := `idem: unknown dialect "oracle": want postgres, mysql, mariadb, tidb, vitess or sqlite` + "\n"; r.stderr != want {
		t.Errorf("unknown dialect: %q, want %q", r.stderr, want)
	}
	r = runCmd(t, "stats", "-dsn", "x.db", "-dialect", "mariadb", "-driver", "pgx")
	if want := `idem: -driver "pgx" does not apply to mariadb: only postgres has a choice of driver` + "\n"; r.stderr != want {
		t.Errorf("-driver pgx for mariadb: %q, want %q", r.stderr, want)
	}
}

// opaque is a dialect from outside package idem, which cannot look at its
// table from outside: it does not implement dialect.TableInspector.
type opaque struct{ idem.Dialect }

func (opaque) Name() string { return "thirdparty" }

// A command on a dialect that does not implement dialect.TableInspector says so,
// goes on as if the table existed, and cannot tell its size.
func TestThirdPartyDialect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, _ := lookupDialect("sqlite")
	d := &database{kind: k, dialect: opaque{idem.SQLite()}, driver: "sqlite",
		dsn: sqliteDSN(filepath.Join(t.TempDir(), "shop.db")), table: "keys"}
	if _, ok := d.inspector(); ok {
		t.Fatal("opaque implements dialect.TableInspector")
	}
	db, err := d.open(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, err := d.store()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, known, err := d.tableExists(ctx, db); known || err != nil {
		t.Errorf("tableExists: known %v, %v; want unknown", known, err)
	}

	e := testEnv(t0)
	var stderr strings.Builder
	e.stderr = &stderr
	db2, err := d.openTable(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if want := "idem: not checking that table keys exists: the thirdparty dialect does not implement dialect.TableInspector\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
	st, err := d.stats(ctx, store, db2)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := d.printStats(&out, st, t0); err != nil {
		t.Fatal(err)
	}
	if got := lines(out.String()); got[len(got)-1] != "size on disk  unknown: the thirdparty dialect does not implement dialect.TableInspector" {
		t.Errorf("stats:\n%s", out.String())
	}

	// A table that is not there is not caught early: the command fails on
	// its first statement instead.
	d.table = "missing"
	stderr.Reset()
	db3, err := d.openTable(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	defer db3.Close()
	missing, err := d.store()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.stats(ctx, missing, db3); err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Errorf("stats of a missing table: %v", err)
	}
}

// uncounting is a dialect from outside package idem without the statements
// that count its records (dialect.Statements.Stats and CountExpired), nor
// a TableInspector.
type uncounting struct{ opaque }

func (u uncounting) Statements(table string, lockTimeout time.Duration) dialect.Statements {
	st := u.opaque.Statements(table, lockTimeout)
	st.Stats, st.CountExpired = "", ""
	return st
}

// On a dialect that cannot count its records, stats says so in place of the
// counts, and purge purges without a progress line, sending no statement
// of its own on the table.
func TestThirdPartyDialectUncounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, _ := lookupDialect("sqlite")
	d := &database{kind: k, dialect: uncounting{opaque{idem.SQLite()}}, driver: "sqlite",
		dsn: sqliteDSN(filepath.Join(t.TempDir(), "shop.db")), table: "keys"}
	db, err := d.open(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, err := d.store(idem.WithClock(func() time.Time { return t0.Add(-48 * time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := store.DoTx(ctx, db, nil, "old", []byte("hash"), func(context.Context, *sql.Tx) (idem.Response, error) {
		return idem.Response{Status: 200}, nil
	}); err != nil {
		t.Fatal(err)
	}
	store, err = d.store(idem.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}

	st, err := d.stats(ctx, store, db)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := d.printStats(&out, st, t0); err != nil {
		t.Fatal(err)
	}
	equalLines(t, out.String(),
		"table         keys (thirdparty)",
		"keys          unknown: the thirdparty dialect has no statement that counts them (dialect.Statements.Stats)",
		"size on disk  unknown: the thirdparty dialect does not implement dialect.TableInspector")

	var progress strings.Builder
	stop := showProgress(ctx, store, db, d.table, &progress, time.Now())
	stop()
	if progress.Len() != 0 {
		t.Errorf("progress line of a dialect that cannot count: %q, want none", progress.String())
	}
	if n, err := store.Purge(ctx, db, 10); err != nil || n != 1 {
		t.Errorf("Purge = %d, %v; want the expired record", n, err)
	}
}
