package idem_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

// unguardedChildEnv names, in the child process of
// TestDialectCatchesUnguardedStatements, the target to run the suite on.
const unguardedChildEnv = "IDEM_UNGUARDED_CHILD"

// unguarded is a built-in dialect whose Complete and Abandon have lost the
// guard of the claim's token, as a dialect written without it would send
// them.
type unguarded struct{ idem.Dialect }

func (u unguarded) Statements(table string, lockTimeout time.Duration) idem.Statements {
	st := u.Dialect.Statements(table, lockTimeout)
	st.Complete = strings.Replace(st.Complete, " AND token = {token}", "", 1)
	st.Abandon = strings.Replace(st.Abandon, " AND token = {token}", "", 1)
	return st
}

// TestDialectCatchesUnguardedStatements runs idemtest.TestDialect's guard
// property on an unguarded copy of each built-in dialect, in a child process
// since a failing suite fails its test, and wants it to fail: a dialect
// author who forgets the guard must hear of it from the suite.
func TestDialectCatchesUnguardedStatements(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		store, err := idem.New(unguarded{tg.dialect})
		if err != nil {
			t.Fatal(err)
		}
		for name, q := range store.Queries() {
			if (name == "complete" || name == "abandon") && strings.Contains(q.SQL, "token") {
				t.Fatalf("the unguarded %s statement still reads the token: %s", name, q.SQL)
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestUnguardedDialectChild$/^GuardedAfterTxEnds$", "-test.v")
		cmd.Env = append(os.Environ(), unguardedChildEnv+"="+tg.name)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("the suite on an unguarded dialect: %v, want it to fail\n%s", err, out)
		}
		for _, sub := range []string{"Complete", "Abandon"} {
			if want := "--- FAIL: TestUnguardedDialectChild/GuardedAfterTxEnds/" + sub; !strings.Contains(string(out), want) {
				t.Errorf("the child's output lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestUnguardedDialectChild is the child process of
// TestDialectCatchesUnguardedStatements; it does nothing in a normal run.
func TestUnguardedDialectChild(t *testing.T) {
	name := os.Getenv(unguardedChildEnv)
	if name == "" {
		t.Skip("the child process of TestDialectCatchesUnguardedStatements")
	}
	for _, tg := range targets() {
		if tg.name == name {
			idemtest.TestDialect(t, unguarded{tg.dialect}, tg.open)
			return
		}
	}
	t.Fatalf("no target %q", name)
}
