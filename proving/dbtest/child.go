package dbtest

import (
	"bufio"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// ReadyToDie is the line a child process prints when it has reached the
// point at which its parent kills it.
const ReadyToDie = "ready to die"

// StartChild starts this test binary running only test, with env added to
// its environment, and returns it once it has printed ReadyToDie: it has
// reached point and waits there to be killed. Each line the child prints
// before that goes to line, when it is not nil, as the child prints it.
func StartChild(t testing.TB, test, point string, line func(string), env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	var lines []string
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if sc.Text() == ReadyToDie {
				ready <- true
				return
			}
			if line != nil {
				line(sc.Text())
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("the child ended before %s:\n%s\n%s", point, strings.Join(lines, "\n"), stderr.String())
		}
	case <-time.After(30 * time.Second):
		// The child starts this binary, opens the database and makes
		// a claim or two: well under 2 s on a loaded machine under
		// -race. The 30 s only turn a child that never gets there
		// (stuck on a lock, say) into a failure instead of a hang.
		_ = cmd.Process.Kill()
		t.Fatalf("the child never reached %s", point)
	}
	return cmd
}

// Kill kills cmd with SIGKILL, so that no deferred function of its runs,
// and waits for it to end, and for the database to end its transactions
// (waitSessionsEnded): what comes next in a test meets a process that is
// dead on both sides of its connections.
func Kill(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitSessionsEnded(t, cmd.Env)
}

// waitSessionsEnded waits until PostgreSQL has ended the transactions of a
// child killed with the environment env, which ChildEnv names on the
// server (childApp). The server ends them once it reads the end of the
// dead process's connections, a moment after the process is gone, and
// until then they hold their locks: a claim or a takeover of the dead
// process's key, which tries the key's advisory lock without waiting,
// would find the key held by a live runner, where a test wants it
// abandoned. The MySQL family's statements wait for a record's lock, so
// that a lingering session only delays them, and SQLite's writer dies with
// its process.
func waitSessionsEnded(t testing.TB, env []string) {
	t.Helper()
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	app := vars[childApp]
	if vars[childDialect] != "postgres" || app == "" {
		return
	}
	db, err := sql.Open(vars[childDriver], vars[childDSN])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state <> 'idle' AND pid <> pg_backend_pid()`, app).Scan(&n)
		switch {
		case err != nil:
			t.Fatalf("look for the killed process's sessions: %v", err)
		case n == 0:
			return
		case time.Now().After(deadline):
			t.Fatalf("30 s after its death, the killed process still has %d sessions in a transaction", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// DieAt returns the function that a child process calls at each point it
// passes: at point, it prints ReadyToDie and waits for its parent's
// SIGKILL.
func DieAt(point string) func(at string) {
	return func(at string) {
		if at == point {
			fmt.Println(ReadyToDie)
			select {} // until the parent's SIGKILL
		}
	}
}

// The variables that give a child process its parent's test database.
const (
	childDriver  = "IDEM_CHILD_DRIVER"
	childDSN     = "IDEM_CHILD_DSN"
	childDialect = "IDEM_CHILD_DIALECT"
	childTable   = "IDEM_CHILD_TABLE"
	childEffects = "IDEM_CHILD_EFFECTS"
	// childApp is the application_name of a child's sessions on
	// PostgreSQL, which Kill waits to see ended.
	childApp = "IDEM_CHILD_APP"
)

// ChildEnv returns the variables that give a child process e's database,
// opened with driver, its store's table and its effect table, for
// OpenChild.
func (e *Env) ChildEnv(driver string) []string {
	dsn, app := e.DSN, ""
	if e.Dialect.Name() == "postgres" {
		// The child's sessions carry a name of the Env's, so that Kill
		// can wait for the server to end them.
		app = "idem_child_" + e.Table
		dsn = WithParams(dsn, "application_name="+app)
	}
	return []string{
		childDriver + "=" + driver,
		childDSN + "=" + dsn,
		childDialect + "=" + e.Dialect.Name(),
		childTable + "=" + e.Table,
		childEffects + "=" + e.Effects.Table,
		childApp + "=" + app,
	}
}

// OpenChild opens, in a child process, the database that its parent's
// ChildEnv names, and returns the parent's Env there: the database, a
// store on the parent's table, made with opts, and the parent's effect
// table. Nothing of it is dropped at the end.
func OpenChild(t testing.TB, opts ...idem.Option) *Env {
	t.Helper()
	dialects := map[string]idem.Dialect{"postgres": idem.Postgres(), "mysql": idem.MySQL(), "mariadb": idem.MariaDB(), "tidb": idem.TiDB(), "vitess": idem.Vitess(), "sqlite": idem.SQLite()}
	d, ok := dialects[os.Getenv(childDialect)]
	if !ok {
		t.Fatalf("the child knows no dialect %q", os.Getenv(childDialect))
	}
	e := &Env{Dialect: d, DSN: os.Getenv(childDSN), Table: os.Getenv(childTable)}
	db, err := sql.Open(os.Getenv(childDriver), e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	e.DB = db
	if e.Store, err = idem.New(d, append([]idem.Option{idem.WithTable(e.Table)}, opts...)...); err != nil {
		t.Fatal(err)
	}
	e.Effects = OpenEffects(d, db, os.Getenv(childEffects))
	return e
}
