package idem_test

import (
	"database/sql"
	"errors"
	"fmt"
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
	"github.com/idemgo/idem/proving/dbtest"
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
	// A table with a shard column whose claim locks the key alone, as the
	// PostgreSQL dialect's did: another customer's claim of a held key
	// fails to take the lock, finds no record of its own and is free by
	// the pair's lock, and is told to retry.
	{name: "shard-lock-of-key", property: "ShardValueOwnLock", family: "postgres", says: "want outcome claimed", dialect: func(d idem.Dialect) idem.Dialect {
		return badShardStatements{Dialect: d, change: func(st *dialect.Statements) {
			const keyLock = `('x' || encode(substr(sha256({key}::bytea), 1, 8), 'hex'))::bit(64)::bigint`
			st.Claim = strings.ReplaceAll(st.Claim, "{lock_id}::bigint", keyLock)
		}}
	}},
	// A text shard column of the MySQL family that compares by a
	// collation that folds case and accents and pads, as a VARCHAR
	// column does by default: "TENANT-a" and "tenant-a " are answered
	// with tenant-a's response.
	{name: "shard-text-folds", property: "ShardValueExact", family: "mysql", says: "outcome = replay, want claimed", dialect: func(d idem.Dialect) idem.Dialect {
		return badShardStatements{Dialect: d, column: func(kind dialect.ShardKind) string {
			if kind.Type == dialect.ShardText {
				return fmt.Sprintf("VARCHAR(%d) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", kind.MaxBytes)
			}
			return map[dialect.ShardType]string{dialect.ShardInt64: "BIGINT", dialect.ShardBytes: fmt.Sprintf("VARBINARY(%d)", kind.MaxBytes), dialect.ShardUUID: "BINARY(36)"}[kind.Type]
		}}
	}},
	// A text shard column of PostgreSQL narrower than its values, whose
	// claim casts the value to it, as the dialect's claim did to the
	// declared type: the cast cuts a long value, the other statements
	// compare it whole, and the request is never answered.
	{name: "shard-cast-cuts", property: "ShardValueExact", family: "postgres", dialect: func(d idem.Dialect) idem.Dialect {
		return badShardStatements{
			column: func(kind dialect.ShardKind) string {
				return map[dialect.ShardType]string{dialect.ShardInt64: "bigint", dialect.ShardText: "varchar(8)", dialect.ShardBytes: "bytea", dialect.ShardUUID: "uuid"}[kind.Type]
			},
			Dialect: d, change: func(st *dialect.Statements) {
				st.Claim = strings.Replace(st.Claim, "{shard}::text", "{shard}::varchar(8)", 1)
			}}
	}},
	// A Stats that counts every record without a response as in flight,
	// the expired ones too, which no longer count.
	{name: "stats-expired-in-flight", property: "Stats", says: "Stats counts 3 live, 2 in flight", dialect: func(d idem.Dialect) idem.Dialect {
		return badStatements{Dialect: d, change: func(st *dialect.Statements) {
			st.Stats = strings.Replace(st.Stats, "expires_at > {now} AND status IS NULL", "status IS NULL", 1)
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
	// column, when set, is the type of shard_key for a kind, in place of
	// the dialect's, and the dialect's check accepts it, as an author's
	// own dialect would.
	column func(dialect.ShardKind) string
}

func (d badShardStatements) ShardColumnSchema(table string, kind dialect.ShardKind) []string {
	schema := d.Dialect.(dialect.ShardColumn).ShardColumnSchema(table, kind)
	if d.column == nil {
		return schema
	}
	_, own := d.Dialect.(dialect.ShardColumn).ShardColumnCheck(table, kind)
	out := slices.Clone(schema)
	out[0] = strings.Replace(out[0], "shard_key    "+own, "shard_key    "+d.column(kind), 1)
	return out
}

func (d badShardStatements) ShardColumnCheck(table string, kind dialect.ShardKind) (string, string) {
	if d.column != nil {
		return "SELECT 1, 1", d.column(kind)
	}
	return d.Dialect.(dialect.ShardColumn).ShardColumnCheck(table, kind)
}

func (d badShardStatements) ShardColumnStatements(table string, kind dialect.ShardKind, lockTimeout time.Duration) dialect.Statements {
	st := d.Dialect.(dialect.ShardColumn).ShardColumnStatements(table, kind, lockTimeout)
	if d.change != nil {
		d.change(&st)
	}
	return st
}

// Capabilities are the built-in dialect's: the faults are in the SQL.
func (d badShardStatements) Capabilities() dialect.Capabilities {
	return dialect.CapabilitiesOf(d.Dialect)
}

// shardSQL returns d's statements and schema of tables with a shard
// column of the kinds that the faults break, or none when d has no such
// table.
func shardSQL(d idem.Dialect) []any {
	sc, ok := d.(dialect.ShardColumn)
	if !ok {
		return nil
	}
	var all []any
	for _, kind := range []idem.ShardKind{dbtest.ShardKind, idem.ShardText(16)} {
		all = append(all, sc.ShardColumnStatements("t", kind, time.Second), sc.ShardColumnSchema("t", kind))
	}
	return all
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
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
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
					if _, err := idem.New(broken, idem.WithShardColumn(idem.ShardInt64())); err != nil {
						t.Fatal(err)
					}
				}
				if reflect.DeepEqual(broken.Statements("t", time.Second), tg.Dialect.Statements("t", time.Second)) &&
					slices.Equal(broken.Schema("t"), tg.Dialect.Schema("t")) &&
					reflect.DeepEqual(shardSQL(broken), shardSQL(tg.Dialect)) {
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
		for _, tg := range dbtest.TargetsWithSettings() {
			if f.name == fault && tg.Name == name {
				idemtest.TestDialect(t, f.dialect(tg.Dialect), func(t *testing.T) *sql.DB { return tg.Open(t) })
				return
			}
		}
	}
	t.Fatalf("no fault %q or no target %q", fault, name)
}
