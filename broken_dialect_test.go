package idem_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

// brokenChildEnv tells the child process of TestDialectCatchesBrokenDialects
// which broken dialect to run the suite on, and on which target:
// "fault target".
const brokenChildEnv = "IDEM_BROKEN_DIALECT_CHILD"

// The faults that idemtest.TestDialect exists to catch, each with the
// property that must fail a built-in dialect given it.
var faults = []struct {
	name, property string
	apply          func(*idem.Statements)
}{
	{"unguarded", "GuardedAfterTxEnds", func(st *idem.Statements) {
		// Complete and Abandon without the guard of the claim's token.
		st.Complete = strings.Replace(st.Complete, " AND token = {token}", "", 1)
		st.Abandon = strings.Replace(st.Abandon, " AND token = {token}", "", 1)
	}},
	{"unchecked-takeover", "TakeoverChecksExpiry", func(st *idem.Statements) {
		// A Takeover that replaces the record whether or not it expired.
		st.Takeover = strings.Replace(st.Takeover, " AND expires_at <= {created_at}", "", 1)
	}},
}

// TestDialectCatchesBrokenDialects runs the property of idemtest.TestDialect
// that guards against each fault on a copy of each built-in dialect that has
// the fault, in a child process since a failing suite fails its test, and
// wants it to fail: a dialect author who makes the mistake must hear of it
// from the suite.
func TestDialectCatchesBrokenDialects(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		for _, f := range faults {
			t.Run(f.name, func(t *testing.T) {
				healthy, err := idem.New(tg.dialect)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := healthy.Queries()["takeover"]; !ok && f.name == "unchecked-takeover" {
					t.Skip("the dialect has no Takeover statement")
				}
				store, err := idem.New(badStatements{tg.dialect, f.apply})
				if err != nil {
					t.Fatal(err)
				}
				if sameQueries(store, healthy) {
					t.Fatalf("the %s copy of the dialect sends the same statements as the dialect", f.name)
				}
				cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenDialectChild$/^"+f.property+"$", "-test.v")
				cmd.Env = append(os.Environ(), brokenChildEnv+"="+f.name+" "+tg.name)
				out, err := cmd.CombinedOutput()
				var exit *exec.ExitError
				if !errors.As(err, &exit) {
					t.Fatalf("the suite on the %s dialect: %v, want it to fail\n%s", f.name, err, out)
				}
				if want := "--- FAIL: TestBrokenDialectChild/" + f.property; !strings.Contains(string(out), want) {
					t.Errorf("the child's output lacks %q:\n%s", want, out)
				}
			})
		}
	})
}

// sameQueries reports whether two stores send the same statements.
func sameQueries(a, b *idem.Store) bool {
	qa, qb := a.Queries(), b.Queries()
	for name, q := range qa {
		if qb[name].SQL != q.SQL {
			return false
		}
	}
	return len(qa) == len(qb)
}

// TestBrokenDialectChild is the child process of
// TestDialectCatchesBrokenDialects; it does nothing in a normal run.
func TestBrokenDialectChild(t *testing.T) {
	fault, name, ok := strings.Cut(os.Getenv(brokenChildEnv), " ")
	if !ok {
		t.Skip("the child process of TestDialectCatchesBrokenDialects")
	}
	for _, f := range faults {
		for _, tg := range targets() {
			if f.name == fault && tg.name == name {
				idemtest.TestDialect(t, badStatements{tg.dialect, f.apply}, tg.open)
				return
			}
		}
	}
	t.Fatalf("no fault %q or no target %q", fault, name)
}
