package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/dbtest"
)

// target is one database, and the flags that name it to the command.
type target struct {
	name    string
	dialect idem.Dialect
	driver  string // the -driver flag; "" for the default
	dsn     func(t *testing.T) string
}

// targets lists the databases the tests can reach: SQLite always, the
// servers when their variables are set. PostgreSQL runs with both drivers.
func targets() []target {
	ts := []target{{
		name:    "sqlite",
		dialect: idem.SQLite(),
		// A bare path: the command must infer the dialect and add the
		// settings SQLite needs.
		dsn: func(t *testing.T) string { return filepath.Join(t.TempDir(), "idem.db") },
	}}
	for _, srv := range dbtest.Servers() {
		driver := ""
		if srv.Driver == "postgres" {
			driver = "postgres" // the -driver flag; pgx is the default
		}
		ts = append(ts, target{name: srv.Name, dialect: srv.Dialect, driver: driver, dsn: func(*testing.T) string { return srv.DSN }})
	}
	return ts
}

// forEach runs f against every target as a parallel subtest, and shows each
// server it cannot reach as a skipped subtest that says how to reach it.
func forEach(t *testing.T, f func(t *testing.T, tb *testDB)) {
	t.Helper()
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			f(t, newTestDB(t, tg))
		})
	}
	dbtest.SkipMissing(t)
}

// testDB is one test's database: a connection of the test's own, and a
// table name that no other test uses.
type testDB struct {
	target
	dsn   string
	db    *sql.DB
	table string
}

func newTestDB(t *testing.T, tg target) *testDB {
	t.Helper()
	tb := &testDB{target: tg, dsn: tg.dsn(t), table: "idemcmd_" + randomName(t)}
	driver, err := driverFor(tg.dialect, tg.driver)
	if err != nil {
		t.Fatal(err)
	}
	dsn := tb.dsn
	if tg.dialect.Name() == "sqlite" {
		dsn = sqliteDSN(dsn)
	}
	if tb.db, err = sql.Open(driver, dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.db.Close() })
	tb.dropAtEnd(t, tb.table)
	return tb
}

// dropAtEnd drops table, if it was made, when the test ends.
func (tb *testDB) dropAtEnd(t *testing.T, table string) {
	t.Cleanup(func() {
		if _, err := tb.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+quoteName(tb.dialect, table)); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
}

// args returns the flags that name the database and the test's table,
// followed by more.
func (tb *testDB) args(more ...string) []string {
	a := []string{"-dsn", tb.dsn, "-table", tb.table}
	if tb.driver != "" {
		a = append(a, "-driver", tb.driver)
	}
	return append(a, more...)
}

// store returns a Store on the test's table, with the table created.
func (tb *testDB) store(t *testing.T, opts ...idem.Option) *idem.Store {
	t.Helper()
	s, err := idem.New(tb.dialect, append([]idem.Option{idem.WithTable(tb.table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background(), tb.db); err != nil {
		t.Fatal(err)
	}
	return s
}

// put stores resp under key through s, as a service would.
func (tb *testDB) put(t *testing.T, s *idem.Store, key string, resp idem.Response) {
	t.Helper()
	res, err := s.DoTx(context.Background(), tb.db, nil, key, idem.Fingerprint([]byte(key)), func(context.Context, *sql.Tx) (idem.Response, error) {
		return resp, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != idem.Claimed {
		t.Fatalf("storing %s: %v, want claimed", key, res.Outcome)
	}
}

// exec runs a statement written with $1, $2... placeholders, rewritten for
// the dialect, and with "key" quoted as the dialect needs.
func (tb *testDB) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	query = strings.ReplaceAll(query, "{T}", quoteName(tb.dialect, tb.table))
	query = strings.ReplaceAll(query, "{key}", quoteName(tb.dialect, "key"))
	for i := len(args); i >= 1; i-- {
		query = strings.ReplaceAll(query, "$"+string(rune('0'+i)), tb.dialect.Placeholder(i))
	}
	if _, err := tb.db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func randomName(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// result is what one run of the command did.
type result struct {
	stdout, stderr string
	code           int
}

// testEnv is an environment with no variables, a clock at now, and stderr
// not a terminal.
func testEnv(now time.Time) *env {
	return &env{
		getenv: func(string) string { return "" },
		now:    func() time.Time { return now },
	}
}

// runWith runs the command in e, with its output captured.
func runWith(t *testing.T, e *env, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e.stdout, e.stderr = &stdout, &stderr
	code := run(context.Background(), e, args)
	r := result{stdout: stdout.String(), stderr: stderr.String(), code: code}
	if testing.Verbose() {
		t.Logf("idem %s: exit %d\n%s%s", strings.Join(args, " "), code, r.stdout, r.stderr)
	}
	return r
}

// runCmd runs the command with the real clock.
func runCmd(t *testing.T, args ...string) result {
	t.Helper()
	return runWith(t, testEnv(time.Now()), args...)
}

// wantCode fails the test unless r exited with code.
func (r result) wantCode(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// lines splits output into lines, without the last newline.
func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// equalLines fails the test unless got has exactly the lines of want.
func equalLines(t *testing.T, got string, want ...string) {
	t.Helper()
	g := lines(got)
	if strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("output:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
}
