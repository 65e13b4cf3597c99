package idem_test

import (
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
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
	family         string // the only family the fault applies to, or ""
	dialect        func(idem.Dialect) badStatements
}{
	{name: "unguarded", property: "GuardedAfterTxEnds", dialect: func(d idem.Dialect) badStatements {
		// Complete and Abandon without the guard of the claim's token.
		return badStatements{Dialect: d, change: func(st *dialect.Statements) {
			st.Complete = strings.Replace(st.Complete, " AND token = {token}", "", 1)
			st.Abandon = strings.Replace(st.Abandon, " AND token = {token}", "", 1)
		}}
	}},
	{name: "unchecked-takeover", property: "TakeoverChecksExpiry", dialect: func(d idem.Dialect) badStatements {
		// A Takeover that replaces the record whether or not it expired.
		return badStatements{Dialect: d, change: func(st *dialect.Statements) {
			st.Takeover = strings.Replace(st.Takeover, " AND expires_at <= {created_at}", "", 1)
		}}
	}},
	{name: "unfenced-phase", property: "RunLease", dialect: func(d idem.Dialect) badStatements {
		// Run's Advance, which begins every phase, without the fence of
		// the token it replaces: a runner whose request was taken over
		// goes on.
		return badStatements{Dialect: d, change: func(st *dialect.Statements) {
			st.Run.Advance = strings.Replace(st.Run.Advance, " AND token = {prev_token}", "", 1)
		}}
	}},
	// Key columns of the MySQL family that compare text, not bytes.
	// latin1 takes every byte, so that only the comparison fails.
	{name: "key-folds-case", property: "KeysAreBytes", family: "mysql", dialect: func(d idem.Dialect) badStatements {
		return keyColumnAs(d, "VARCHAR(512) CHARACTER SET latin1 COLLATE latin1_general_ci")
	}},
	{name: "key-pads-spaces", property: "KeysAreBytes", family: "mysql", dialect: func(d idem.Dialect) badStatements {
		// A binary collation, but PAD SPACE: "k" and "k " are one key.
		return keyColumnAs(d, "VARCHAR(512) CHARACTER SET latin1 COLLATE latin1_bin")
	}},
}

// keyColumnAs is d with its key column made of type typ.
func keyColumnAs(d idem.Dialect, typ string) badStatements {
	return badStatements{Dialect: d, schema: func(stmt string) string {
		return strings.Replace(stmt, "VARBINARY(512) NOT NULL", typ+" NOT NULL", 1)
	}}
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
				if f.family != "" && f.family != tg.Family {
					t.Skipf("the fault is one of the %s family's tables", f.family)
				}
				healthy, err := idem.New(tg.Dialect)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := healthy.Queries()["Takeover"]; !ok && f.name == "unchecked-takeover" {
					t.Skip("the dialect has no Takeover statement")
				}
				broken := f.dialect(tg.Dialect)
				if _, err := idem.New(broken); err != nil {
					t.Fatal(err)
				}
				if reflect.DeepEqual(broken.Statements("t", time.Second), tg.Dialect.Statements("t", time.Second)) &&
					slices.Equal(broken.Schema("t"), tg.Dialect.Schema("t")) {
					t.Fatalf("the %s copy of the dialect sends the same statements as the dialect", f.name)
				}
				cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenDialectChild$/^"+f.property+"$", "-test.v")
				cmd.Env = append(os.Environ(), brokenChildEnv+"="+f.name+" "+tg.Name)
				out, err := cmd.CombinedOutput()
				var exit *exec.ExitError
				if !errors.As(err, &exit) {
					t.Fatalf("the suite on the %s dialect: %v, want it to fail\n%s", f.name, err, out)
				}
				if want := "--- FAIL: TestBrokenDialectChild/" + f.property; !strings.Contains(string(out), want) {
					t.Errorf("the child's output lacks %q:\n%s", want, out)
				}
				if f.property == "KeysAreBytes" && !strings.Contains(string(out), "as if an earlier key were the same") {
					t.Errorf("the suite failed the %s copy for another reason than its keys:\n%s", f.name, out)
				}
			})
		}
	})
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
			if f.name == fault && tg.Name == name {
				idemtest.TestDialect(t, f.dialect(tg.Dialect), func(t *testing.T) *sql.DB { return tg.Open(t) })
				return
			}
		}
	}
	t.Fatalf("no fault %q or no target %q", fault, name)
}
