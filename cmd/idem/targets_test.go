package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// target is one database, and the flags that name it to the command.
type target struct {
	dbtest.Target
	// flags are the -dialect and -driver flags, where the command would
	// not choose the target's dialect and driver by itself.
	flags []string
	// What differs between databases, for the tests to expect:
	//
	// fileTitle is how the demo names a database in a file, whose name
	// it shows; "" for a server, whose DSN it never shows.
	fileTitle string
	// busyDSN, when set, adds to a DSN a short wait for a database that
	// one writer holds whole: a command that meets a held key waits at
	// BEGIN for that long, and the database is busy.
	busyDSN func(dsn string) string
	// sizeFrom is how stats says it measured the table, and sizeLags is
	// true where the measure lags behind the latest writes.
	sizeFrom string
	sizeLags bool
}

// expect is what the tests expect of each dialect the command knows, by its
// -dialect value.
var expect = map[string]struct {
	sizeFrom string
	sizeLags bool
}{
	"postgres": {sizeFrom: "table, indexes and TOAST (pg_total_relation_size)"},
	"mysql":    {sizeFrom: "table and indexes (information_schema.tables, as of InnoDB's last statistics)", sizeLags: true},
	"mariadb":  {sizeFrom: "table and indexes (information_schema.tables, as of InnoDB's last statistics)", sizeLags: true},
	"tidb":     {sizeFrom: "table and indexes (information_schema.tables, as of InnoDB's last statistics)", sizeLags: true},
	"vitess":   {sizeFrom: "table and indexes (information_schema.tables, as of InnoDB's last statistics)", sizeLags: true},
	"sqlite":   {sizeFrom: "table and indexes (dbstat)"},
}

// knownOf returns what the command knows of the dialect d.
func knownOf(t testing.TB, d idem.Dialect) *knownDialect {
	t.Helper()
	for i := range knownDialects {
		if knownDialects[i].dialect() == d {
			return &knownDialects[i]
		}
	}
	t.Fatalf("the command does not know the %s dialect", d.Name())
	return nil
}

// commandTarget is tg, one of dbtest.Targets, as the command names it.
func commandTarget(t testing.TB, tg dbtest.Target) target {
	t.Helper()
	k := knownOf(t, tg.Dialect)
	x, ok := expect[k.name]
	if !ok {
		t.Fatalf("the tests expect nothing of the %s dialect", k.name)
	}
	ct := target{Target: tg, sizeFrom: x.sizeFrom, sizeLags: x.sizeLags}
	if tg.Family == "sqlite" {
		// A bare path: the command must infer the dialect and add the
		// settings SQLite needs.
		ct.DSN = func(t testing.TB) string { return filepath.Join(t.TempDir(), "idem.db") }
		ct.fileTitle = "SQLite"
		ct.busyDSN = func(dsn string) string { return dsn + "?_pragma=busy_timeout(100)" }
		return ct
	}
	// Where the DSN tells the dialect, the command infers it.
	if inferred, _ := inferDialect(tg.DSN(t)); inferred != k.name {
		ct.flags = append(ct.flags, "-dialect", k.name)
	}
	if tg.Driver != k.drivers[0].name {
		ct.flags = append(ct.flags, "-driver", tg.Driver)
	}
	return ct
}

// forEach runs f against every one of dbtest.Targets as a parallel subtest,
// and shows each server it cannot reach as a skipped subtest that says how
// to reach it.
func forEach(t *testing.T, f func(t *testing.T, tb *testDB)) {
	t.Helper()
	dbtest.ForEach(t, dbtest.Targets(), func(t *testing.T, tg dbtest.Target) {
		t.Parallel()
		f(t, newTestDB(t, commandTarget(t, tg)))
	})
}

// forEachDatabase is forEach, then TiDB in its default mode and Vitess's
// sharded keyspace, or shows them skipped: for the commands whose own
// statements must run on every database the command knows. On Vitess,
// store shards the table by its key.
func forEachDatabase(t *testing.T, f func(t *testing.T, tb *testDB)) {
	t.Helper()
	forEach(t, f)
	var more []dbtest.Target
	for _, tg := range dbtest.TiDBTargets() {
		if tg.Dialect == idem.TiDB() { // the command knows no wrapped dialect
			more = append(more, tg)
		}
	}
	dbtest.ForEach(t, append(more, dbtest.VitessTargets()...), func(t *testing.T, tg dbtest.Target) {
		t.Parallel()
		f(t, newTestDB(t, commandTarget(t, tg)))
	})
	dbtest.SkipMissingTiDB(t)
	dbtest.SkipMissingVitess(t)
}

// testDB is one test's database: a connection of the test's own, and a
// table name that no other test uses.
type testDB struct {
	target
	dsn   string
	d     *database // as the command resolves the target's flags
	db    *sql.DB
	table string
	// vindexed is true once store has sharded the table by its key on
	// Vitess's keyspace.
	vindexed bool
}

func newTestDB(t *testing.T, tg target) *testDB {
	t.Helper()
	tb := &testDB{target: tg, dsn: tg.DSN(t), table: "idemcmd_" + dbtest.RandomName()}
	var f dbFlags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	f.register(fs, true, tb.table)
	if err := fs.Parse(append([]string{"-dsn", tb.dsn}, tg.flags...)); err != nil {
		t.Fatal(err)
	}
	var err error
	if tb.d, err = f.resolve(testEnv(time.Now()), true); err != nil {
		t.Fatal(err)
	}
	if tb.d.dialect != tg.Dialect {
		t.Fatalf("the command resolves %s with flags %q to the %s dialect, want %s", tb.dsn, tg.flags, tb.d.dialect.Name(), tg.Dialect.Name())
	}
	if tb.db, err = sql.Open(tb.d.driver, tb.d.dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.db.Close() })
	tb.dropAtEnd(t, tb.table)
	return tb
}

// quote quotes a name as the target's dialect requires.
func (tb *testDB) quote(name string) string { return tb.d.quote(name) }

// dropAtEnd drops table, if it was made, when the test ends.
func (tb *testDB) dropAtEnd(t *testing.T, table string) {
	t.Cleanup(func() {
		if _, err := tb.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+tb.quote(table)); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
}

// args returns the flags that name the database and the test's table,
// followed by more.
func (tb *testDB) args(more ...string) []string {
	a := []string{"-dsn", tb.dsn, "-table", tb.table}
	a = append(a, tb.flags...)
	return append(a, more...)
}

// store returns a Store on the test's table, with the table created.
func (tb *testDB) store(t *testing.T, opts ...idem.Option) *idem.Store {
	t.Helper()
	s, err := idem.New(tb.Dialect, append([]idem.Option{idem.WithTable(tb.table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background(), tb.db); err != nil {
		t.Fatal(err)
	}
	if tb.Dialect == idem.Vitess() && !tb.vindexed {
		dbtest.AddVindex(t, tb.db, tb.table, "`key`")
		tb.vindexed = true
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

// incarnation returns the incarnation of key's live record, as s reads
// it, in decimal, as inspect shows it; it fails the test where it is 0,
// which no record that s claimed has.
func (tb *testDB) incarnation(t *testing.T, s *idem.Store, key string) string {
	t.Helper()
	res, err := s.Lookup(context.Background(), tb.db, key)
	if err != nil {
		t.Fatalf("lookup %s: %v", key, err)
	}
	if res.Incarnation == 0 {
		t.Fatalf("the record of %s has no incarnation", key)
	}
	return strconv.FormatInt(res.Incarnation, 10)
}

// exec runs a statement written with $1, $2... placeholders, rewritten for
// the dialect, and with "key" quoted as the dialect needs.
func (tb *testDB) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	query = strings.ReplaceAll(query, "{T}", tb.quote(tb.table))
	query = strings.ReplaceAll(query, "{key}", tb.quote("key"))
	for i := len(args); i >= 1; i-- {
		query = strings.ReplaceAll(query, "$"+string(rune('0'+i)), tb.Dialect.Placeholder(i))
	}
	if _, err := tb.db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
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

// The command as go build makes it, for the tests that run it as an
// operator does, whose exit status is the process's own. It is built once,
// by the first test that runs it, in binDir, which TestMain removes.
var (
	binDir string
	built  = sync.OnceValues(func() (string, error) {
		dir, err := os.MkdirTemp("", "idem-cmd-test")
		if err != nil {
			return "", err
		}
		binDir = dir
		bin := filepath.Join(dir, "idem")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build: %v\n%s", err, out)
		}
		return bin, nil
	})
)

// builtCommand returns the built command, built first if no test has
// built it yet. A machine without the go command skips the test.
func builtCommand(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command to build idem with: %v", err)
	}
	bin, err := built()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// runBuilt runs the built command with args, in the test's environment
// without IDEM_DSN and IDEM_DIALECT, as runWith runs it in process.
func runBuilt(t *testing.T, args ...string) result {
	t.Helper()
	bin := builtCommand(t)
	cmd := exec.Command(bin, args...)
	for _, v := range os.Environ() {
		if !strings.HasPrefix(v, envDSN+"=") && !strings.HasPrefix(v, envDialect+"=") {
			cmd.Env = append(cmd.Env, v)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v", bin, err)
	}
	r := result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	if r.code < 0 {
		t.Fatalf("idem %s: %v", strings.Join(args, " "), cmd.ProcessState)
	}
	if testing.Verbose() {
		t.Logf("idem %s (built): exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
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
