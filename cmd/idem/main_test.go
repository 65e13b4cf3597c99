package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain removes the command that runBuilt built, if a test built it.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func TestUsage(t *testing.T) {
	t.Parallel()
	r := runCmd(t, "-h")
	r.wantCode(t, exitOK)
	for _, c := range commands {
		if !strings.Contains(r.stdout, "\n  "+c.name+" ") {
			t.Errorf("idem -h does not list %s:\n%s", c.name, r.stdout)
		}
	}
	for _, flag := range []string{"-dsn", "-dialect", "-table", "-driver", "IDEM_DSN", "IDEM_DIALECT"} {
		if !strings.Contains(r.stdout, flag) {
			t.Errorf("idem -h does not mention %s", flag)
		}
	}

	r = runCmd(t)
	r.wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, "Commands:") || r.stdout != "" {
		t.Errorf("idem without a command: want the usage on stderr, got stdout %q stderr %q", r.stdout, r.stderr)
	}
}

// Every command explains itself, with an example, and exits zero.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "-h"}, {"help", c.name}} {
			r := runCmd(t, args...)
			r.wantCode(t, exitOK)
			if !strings.HasPrefix(r.stdout, "Usage: idem "+c.name) {
				t.Errorf("idem %s: help does not start with its usage line:\n%s", strings.Join(args, " "), r.stdout)
			}
			for _, want := range []string{"Example:", "\nFlags:\n", "-table"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("idem %s: help lacks %q:\n%s", strings.Join(args, " "), want, r.stdout)
				}
			}
			if r.stderr != "" {
				t.Errorf("idem %s: stderr %q", strings.Join(args, " "), r.stderr)
			}
			// The commands that take a key take it alike, and say why.
			takesKey := strings.Contains(r.stdout, "\n  -key ")
			if says := strings.Contains(r.stdout, keyHelp); takesKey != says {
				t.Errorf("idem %s: takes -key %v, but its help explains it %v", strings.Join(args, " "), takesKey, says)
			}
			// And they say which flag reaches a key of which adapter.
			if says := strings.Contains(r.stdout, scopeHelp); takesKey != says {
				t.Errorf("idem %s: takes -key %v, but its help explains -scope and -single-client %v", strings.Join(args, " "), takesKey, says)
			}
		}
	}
}

// Bad input exits with 2 when the command line is wrong and 1 when the
// database is, with a message that says what to do.
func TestBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db") // an empty file is an empty SQLite database
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.db")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"bogus"}, exitUsage, `idem: unknown command "bogus": run 'idem -h' for the list`},
		{[]string{"help", "bogus"}, exitUsage, `idem: unknown command "bogus"`},
		{[]string{"-dsn", "x.db", "stats"}, exitUsage, "idem: flag -dsn before the command"},
		{[]string{"stats"}, exitUsage, "idem: no database: set -dsn or IDEM_DSN"},
		{[]string{"stats", "-dsn", "db.internal:5432"}, exitUsage, "idem: cannot tell the dialect from the DSN: set -dialect or IDEM_DIALECT"},
		{[]string{"stats", "-dsn", empty, "-dialect", "oracle"}, exitUsage, `idem: unknown dialect "oracle"`},
		{[]string{"stats", "-dsn", empty, "-table", "keys; DROP TABLE users"}, exitUsage, "idem: bad -table: invalid argument"},
		{[]string{"stats", "-dsn", empty, "-nope"}, exitUsage, "idem: stats: flag provided but not defined: -nope; run 'idem stats -h'"},
		{[]string{"stats", "-dsn", empty, "extra"}, exitUsage, "idem: stats takes no arguments"},
		{[]string{"stats", "-dsn", empty, "-driver", "pgx"}, exitUsage, `idem: -driver "pgx" does not apply to sqlite`},
		{[]string{"stats", "-dsn", "postgres://db.internal/shop", "-driver", "odbc"}, exitUsage, `idem: unknown -driver "odbc" for postgres`},
		{[]string{"purge", "-dsn", empty, "-batch", "0"}, exitUsage, "idem: -batch must be positive, got 0"},
		{[]string{"purge", "-dsn", empty, "-batch", "many"}, exitUsage, "idem: purge: invalid value"},
		{[]string{"inspect", "-dsn", empty}, exitUsage, "idem: inspect needs -key: the key the client sent"},
		// The old form, the key as an argument, fails and says how to give it.
		{[]string{"inspect", "-dsn", empty, "order-1"}, exitUsage, `idem: inspect takes the key with -key, not as an argument: idem inspect -key "order-1" ...`},
		{[]string{"inspect", "-dsn", empty, "a", "b"}, exitUsage, `idem: inspect takes no arguments, got ["a" "b"]: give the key with -key`},
		{[]string{"inspect", "-dsn", empty, "-key", "order-1", "extra"}, exitUsage, `idem: inspect takes no arguments, got ["extra"]: give the key with -key`},
		{[]string{"inspect", "-dsn", empty, "-key", strings.Repeat("k", 513)}, exitUsage, "idem: a key is 1 to 512 bytes, got 513"},
		{[]string{"settle", "-dsn", empty, "-status", "201"}, exitUsage, "idem: settle needs -key: the key the client sent"},
		{[]string{"settle", "-dsn", empty, "order-1", "-status", "201"}, exitUsage, `idem: settle takes the key with -key, not as an argument: idem settle -key "order-1" ...`},
		{[]string{"settle", "-dsn", empty, "-key", "order-1"}, exitUsage, "idem: settle needs -status: the status the request would have sent"},
		{[]string{"settle", "-dsn", empty, "-key", "order-1", "-status", "4294967496"}, exitUsage, "idem: -status must fit in 32 bits"},
		{[]string{"settle", "-dsn", empty, "-key", "order-1", "-status", "201", "-body", "", "-body-file", "b.json"}, exitUsage, "idem: give the body with -body or -body-file, not both"},
		{[]string{"settle", "-dsn", empty, "-key", "order-1", "-status", "201", "-header", "Location /orders/1"}, exitUsage, `idem: settle: invalid value "Location /orders/1" for flag -header: want 'Name: value'`},
		{[]string{"settle", "-dsn", empty, "-key", "order-1", "-status", "201", "-header", "X: a\nb"}, exitUsage, "idem: settle: invalid value"},
		{[]string{"settle", "-dsn", empty, "-scope", "acct_42", "-status", "201", "-key", strings.Repeat("k", 500)}, exitUsage, "idem: a key is 1 to 512 bytes, got 565"},
		{[]string{"release", "-dsn", empty}, exitUsage, "idem: release needs -key"},
		{[]string{"release", "-dsn", empty, "order-1", "-no-effect"}, exitUsage, `idem: release takes the key with -key, not as an argument: idem release -key "order-1" ...`},
		{[]string{"release", "-dsn", empty, "-key", "order-1"}, exitUsage, "idem: release needs -no-effect: release only a key whose request had no effect"},
		{[]string{"forget", "-dsn", empty}, exitUsage, "idem: forget needs -key: the key the client sent"},
		{[]string{"forget", "-dsn", empty, "order-1"}, exitUsage, `idem: forget takes the key with -key, not as an argument: idem forget -key "order-1" ...`},
		{[]string{"forget", "-dsn", empty, "-key", strings.Repeat("k", 513)}, exitUsage, "idem: a key is 1 to 512 bytes, got 513"},
		{[]string{"schema"}, exitUsage, "idem: no dialect: set -dialect or IDEM_DIALECT"},
		// -shard names a record only beside -shard-column, which needs it
		// on the commands that take a key; each kind reads -shard its own
		// way, and refuses a value that its column cannot hold, before
		// the command connects.
		{[]string{"forget", "-dsn", empty, "-key", "k", "-shard", "42"}, exitUsage, "idem: -shard needs -shard-column: a shard value names a record only in a table with a shard column"},
		{[]string{"inspect", "-dsn", empty, "-key", "k", "-shard", ""}, exitUsage, "idem: -shard needs -shard-column"},
		{[]string{"settle", "-dsn", empty, "-key", "k", "-status", "201", "-shard-column", "int64"}, exitUsage, "idem: settle needs -shard with -shard-column: the shard value of the record"},
		{[]string{"release", "-dsn", empty, "-key", "k", "-no-effect", "-shard-column", "text(64)"}, exitUsage, "idem: release needs -shard with -shard-column"},
		{[]string{"forget", "-dsn", empty, "-key", "k", "-shard-column", "uuid"}, exitUsage, "idem: forget needs -shard with -shard-column"},
		{[]string{"inspect", "-dsn", empty, "-key", "k", "-shard-column", "int64", "-shard", "acme"}, exitUsage, `idem: -shard "acme": the shard column is int64, and the value is not a decimal 64-bit integer`},
		{[]string{"forget", "-dsn", empty, "-key", "k", "-shard-column", "INT64", "-shard", "4.5"}, exitUsage, `idem: -shard "4.5": the shard column is int64, and the value is not a decimal 64-bit integer`},
		{[]string{"settle", "-dsn", empty, "-key", "k", "-status", "201", "-shard-column", "int64", "-shard", " 7"}, exitUsage, `idem: -shard " 7": the shard column is int64`},
		{[]string{"release", "-dsn", empty, "-key", "k", "-no-effect", "-shard-column", "int64", "-shard", "9223372036854775808"}, exitUsage, `idem: -shard "9223372036854775808": the shard column is int64`},
		{[]string{"inspect", "-dsn", empty, "-key", "k", "-shard-column", "text(4)", "-shard", "acme corp"}, exitUsage, `idem: -shard "acme corp": the shard column is text(4), and the value is 9 bytes long, longer than 4`},
		{[]string{"inspect", "-dsn", empty, "-key", "k", "-shard-column", "text(4)", "-shard", "\xff"}, exitUsage, `idem: -shard "\xff": the shard column is text(4), and the value is not valid UTF-8`},
		{[]string{"forget", "-dsn", empty, "-key", "k", "-shard-column", "bytes(16)", "-shard", "acme"}, exitUsage, `idem: -shard "acme": the shard column is bytes(16), and the value is not hex digits, two for each byte`},
		{[]string{"forget", "-dsn", empty, "-key", "k", "-shard-column", "bytes(16)", "-shard", "abc"}, exitUsage, `idem: -shard "abc": the shard column is bytes(16), and the value is not hex digits`},
		{[]string{"forget", "-dsn", empty, "-key", "k", "-shard-column", "bytes(2)", "-shard", "00ff10"}, exitUsage, `idem: -shard "00ff10": the shard column is bytes(2), and the value is 3 bytes long, longer than 2`},
		{[]string{"settle", "-dsn", empty, "-key", "k", "-status", "201", "-shard-column", "uuid", "-shard", "5f0c3c1e8f0b4a439a571a3c1d6c2b11"}, exitUsage, `idem: -shard "5f0c3c1e8f0b4a439a571a3c1d6c2b11": the shard column is uuid, and the column cannot hold it: a shard value "5f0c3c1e8f0b4a439a571a3c1d6c2b11" that is not a UUID`},
		// -shard-column is a kind, not an SQL type.
		{[]string{"stats", "-dsn", empty, "-shard-column", "BIGINT"}, exitUsage, `idem: bad -shard-column: invalid argument: shard kind "BIGINT": want int64, text(N), bytes(N) or uuid`},
		{[]string{"stats", "-dsn", empty, "-shard-column", "int64; DROP TABLE users"}, exitUsage, "idem: bad -shard-column: invalid argument"},
		{[]string{"inspect", "-dsn", empty, "-key", "k", "-shard-column", "varchar(64)", "-shard", "acme"}, exitUsage, `idem: bad -shard-column: invalid argument: shard kind "varchar(64)"`},
		{[]string{"migrate", "-dsn", empty, "-shard-column", "text(256)"}, exitUsage, `idem: bad -shard-column: invalid argument: shard kind "text(256)": N must be 1 to 255`},
		{[]string{"schema", "-dialect", "postgres", "-shard-column", "bytes(0)"}, exitUsage, "idem: bad -shard-column: invalid argument"},
		{[]string{"demo", "-shard-column", "int64"}, exitUsage, "idem: demo: flag provided but not defined: -shard-column"},
		{[]string{"demo", "-dialect", "postgres"}, exitUsage, "idem: -dialect postgres needs -dsn"},
		{[]string{"demo", "-orders", "idem_demo_keys"}, exitUsage, "idem: -orders and -table name the same table"},
		{[]string{"stats", "-dsn", missing}, exitError, "idem: sqlite database " + missing + " does not exist: check -dsn"},
		{[]string{"inspect", "-dsn", empty, "-key", "k"}, exitError, "idem: table idempotency_keys does not exist in this sqlite database: check -table, or create it with idem migrate"},
		// A key that starts with a dash is the value of -key.
		{[]string{"inspect", "-dsn", empty, "-key", "-k"}, exitError, "idem: table idempotency_keys does not exist in this sqlite database: check -table, or create it with idem migrate"},
		{[]string{"purge", "-dsn", empty, "-table", "other"}, exitError, "idem: table other does not exist"},
		{[]string{"settle", "-dsn", empty, "-key", "k", "-status", "201", "-body-file", missing}, exitError, "idem: read -body-file: open " + missing + ": no such file"},
		{[]string{"release", "-dsn", empty, "-key", "k", "-no-effect"}, exitError, "idem: table idempotency_keys does not exist"},
		{[]string{"forget", "-dsn", empty, "-key", "k"}, exitError, "idem: table idempotency_keys does not exist"},
		{[]string{"stats", "-dsn", "postgres://nobody@127.0.0.1:1/none?connect_timeout=5"}, exitError, "idem: cannot reach the postgres database (check -dsn): "},
	} {
		r := runCmd(t, c.args...)
		if r.code != c.code || !strings.HasPrefix(r.stderr, c.msg) {
			t.Errorf("idem %s: exit %d, stderr %q; want exit %d, stderr starting %q", strings.Join(c.args, " "), r.code, r.stderr, c.code, c.msg)
		}
		if c.code == exitUsage && strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("idem %s: want one line on stderr, got %q", strings.Join(c.args, " "), r.stderr)
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("stats created %s", missing)
	}
}

// IDEM_DSN and IDEM_DIALECT stand in for the flags, which win over them.
func TestEnvironment(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shop.sqlite")
	vars := map[string]string{envDSN: path}
	e := testEnv(time.Now())
	e.getenv = func(k string) string { return vars[k] }

	r := runWith(t, e, "migrate")
	r.wantCode(t, exitOK)
	equalLines(t, r.stdout, "created table idempotency_keys and its index (sqlite)")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("migrate with IDEM_DSN: %v", err)
	}

	vars[envDialect] = "mysql"
	r = runWith(t, e, "schema")
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "ENGINE=InnoDB") {
		t.Errorf("schema with IDEM_DIALECT=mysql:\n%s", r.stdout)
	}
	r = runWith(t, e, "schema", "-dialect", "sqlite")
	r.wantCode(t, exitOK)
	if strings.Contains(r.stdout, "ENGINE=InnoDB") {
		t.Errorf("schema -dialect sqlite with IDEM_DIALECT=mysql printed MySQL:\n%s", r.stdout)
	}
}
