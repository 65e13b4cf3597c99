package main

import (
	"flag"
	"slices"
	"testing"
	"time"
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

// Flags may follow the key, and "--" lets a key start with a dash.
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
