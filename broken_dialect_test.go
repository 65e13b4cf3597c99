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
	says           string // what the property's failure says, when set: it failed for the fault
	dialect        func(idem.Dialect) idem.Dialect
}{
	{name: "unguarded", property: "GuardedAfterTxEnds", dialect: func(d idem.Dialect) idem.Dialect {
		// Complete and Abandon without the guard of the claim's token.
		return badStatements{Dialect: d, change: func(st *dialect.Statements) {
			st.Complete = strings.Replace(st.Complete, " AND token = {token}", "", 1)
			st.Abandon = strings.Replace(st.Abandon, " AND token = {token}", "", 1)
		}}
	}},
	{name: "unchecked-takeover", property: "TakeoverChecksExpiry", dialect: func(d idem.Dialect) idem.Dialect {
		// A Takeover that replaces the record whether or not it expired.
		return badStatements{Dialect: d, change: func(st *dialect.Statements) {
			st.Takeover = strings.Replace(st.Takeover, " AND expires_at <= {created_at}", "", 1)
		}}
	}},
	{name: "unfenced-phase", property: "RunLease", dialect: func(d idem.Dialect) idem.Dialect {
		// Run's Advance, which begins every phase, without the fence of
		// the token it replaces: a runner whose request was taken over
		// goes on.
		return badStatements{Dialect: d, change: func(st *dialect.Statements) {
			st.Run.Advance = strings.Replace(st.Run.Advance, " AND token = {prev_token}", "", 1)
		}}
	}},
	// A dialect whose claim writes no incarnation, as the built-in
	// dialects before incarnations, and a dialect written outside the
	// module then: it works on, its records reading 0, but it breaks
	// the contract of incarnations.
	{name: "no-incarnation", property: "Incarnation", says: "the dialect writes no incarnation", dialect: func(d idem.Dialect) idem.Dialect {
		return previousDialect{d}
	}},
	// The same dialect, through Run: every record of a key sends the call
	// keys of the one before, and a provider answers a new request with an
	// old request's charge.
	{name: "no-incarnation-call-keys", property: "CallKeysPerRecord", says: "as Lookup reads it", dialect: func(d idem.Dialect) idem.Dialect {
		return previousDialect{d}
	}},
	// A table with a shard column whose purge names the batch's records
	// by their key alone: it deletes, beside each expired record, the live
	// records of other shard values with the same key. The fault is in
	// the one statement of the dialects whose purge is one (SQLite's);
	// New cannot see it, since the statement binds no {key}.
	{name: "shard-purge-by-key", property: "ShardColumnPurge", family: "sqlite", says: "Purge = 13, <nil>, want the 12 expired records", dialect: func(d idem.Dialect) idem.Dialect {
		return badShardStatements{Dialect: d, change: func(st *dialect.Statements) {
			st.Purge = strings.Replace(st.Purge, "(shard_key, key) IN (SELECT shard_key, key FROM", "key IN (SELECT key FROM", 1)
		}}
	}},
	// A table with a shard column whose lists of unfinished requests leave
	// shard_key out, as the table without the column has them: Resume
	// could not tell whose request it runs.
	{name: "shard-unfinished-unnamed", property: "ShardColumnResume", says: "list unfinished requests", dialect: func(d idem.Dialect) idem.Dialect {
		return badShardStatements{Dialect: d, change: func(st *dialect.Statements) {
			st.Run.Unfinished = strings.Replace(st.Run.Unfinished, "SELECT shard_key, ", "SELECT ", 1)
			st.Run.Resumable = strings.Replace(st.Run.Resumable, "SELECT shard_key, ", "SELECT ", 1)
		}}
	}},
	// Key columns of the MySQL family that compare text, not bytes.
	// latin1 takes every byte, so that only the comparison fails.
	{name: "key-folds-case", property: "KeysAreBytes", family: "mysql", dialect: func(d idem.Dialect) idem.Dialect {
		return keyColumnAs(d, "VARCHAR(512) CHARACTER SET latin1 COLLATE latin1_general_ci")
	}},
	{name: "key-pads-spaces", property: "KeysAreBytes", family: "mysql", dialect: func(d idem.Dialect) idem.Dialect {
		// A binary collation, but PAD SPACE: "k" and "k " are one key.
		return keyColumnAs(d, "VARCHAR(512) CHARACTER SET latin1 COLLATE latin1_bin")
	}},
}

// badShardStatements is d with change made to the statements of its
// table with a shard column (dialect.ShardColumn); its other statements
// are d's.
type badShardStatements struct {
	idem.Dialect
	change func(*dialect.Statements)
}

func (d badShardStatements) ShardColumnSchema(table, typ string) []string {
	return d.Dialect.(dialect.ShardColumn).ShardColumnSchema(table, typ)
}

func (d badShardStatements) ShardColumnStatements(table, typ string, lockTimeout time.Duration) dialect.Statements {
	st := d.Dialect.(dialect.ShardColumn).ShardColumnStatements(table, typ, lockTimeout)
	d.change(&st)
	return st
}

// Capabilities are the built-in dialect's: the faults are in the SQL.
func (d badShardStatements) Capabilities() dialect.Capabilities {
	return dialect.CapabilitiesOf(d.Dialect)
}

// shardStatements returns d's statements of a table with a shard column,
// or none when d has no such table.
func shardStatements(d idem.Dialect) dialect.Statements {
	sc, ok := d.(dialect.ShardColumn)
	if !ok {
		return dialect.Statements{}
	}
	return sc.ShardColumnStatements("t", "BIGINT", time.Second)
}

// keyColumnAs is d with its key column made of type typ.
func keyColumnAs(d idem.Dialect, typ string) idem.Dialect {
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
					t.Skipf("the fault is in SQL of the %s family's dialects alone", f.family)
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
				if _, ok := broken.(badShardStatements); ok {
					if _, err := idem.New(broken, idem.WithShardColumn("BIGINT")); err != nil {
						t.Fatal(err)
					}
				}
				if reflect.DeepEqual(broken.Statements("t", time.Second), tg.Dialect.Statements("t", time.Second)) &&
					slices.Equal(broken.Schema("t"), tg.Dialect.Schema("t")) &&
					reflect.DeepEqual(shardStatements(broken), shardStatements(tg.Dialect)) {
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
				if f.says != "" && !strings.Contains(string(out), f.says) {
					t.Errorf("the suite failed the %s copy, but its output lacks %q:\n%s", f.name, f.says, out)
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
