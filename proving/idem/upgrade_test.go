package idem_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// previousStatements is where the schema and the statements of the
// built-in dialects are kept as the version before incarnations made them,
// for the table idem_v0 and a lock timeout of a second, keyed by the
// dialect's name: what the binaries of that version send.
const previousStatements = "testdata/statements-before-incarnation.json"

// previousTable is the table of previousStatements.
const previousTable = "idem_v0"

var previous = sync.OnceValues(func() (map[string]struct {
	Schema     []string
	Statements dialect.Statements
}, error) {
	b, err := os.ReadFile(previousStatements)
	if err != nil {
		return nil, err
	}
	var m map[string]struct {
		Schema     []string
		Statements dialect.Statements
	}
	return m, json.Unmarshal(b, &m)
})

// previousDialect is a built-in dialect as the version before incarnations
// made it: its table and its statements as that version's binaries send
// them, without the column, {incarnation} or the procedure that writes it,
// as a dialect written outside the module before then has them too. What
// cannot be read in SQL (errors, placeholders, capabilities) is the
// dialect's own. Its statements are for a lock timeout of a second.
type previousDialect struct {
	idem.Dialect
}

func (d previousDialect) pinned() (schema []string, st dialect.Statements) {
	m, err := previous()
	if err != nil {
		panic(err) // the tests' own file
	}
	p, ok := m[d.Dialect.Name()]
	if !ok {
		panic("no statements of the previous version for the " + d.Dialect.Name() + " dialect")
	}
	return p.Schema, p.Statements
}

// Schema is the previous version's, which that version's Migrate ran.
func (d previousDialect) Schema(table string) []string {
	schema, _ := d.pinned()
	out := make([]string, len(schema))
	for i, q := range schema {
		out[i] = strings.ReplaceAll(q, previousTable, table)
	}
	return out
}

// Upgrades are none: Schema makes the previous version's table.
func (previousDialect) Upgrades(string) []dialect.Upgrade { return nil }

// Statements are the previous version's, for table.
func (d previousDialect) Statements(table string, _ time.Duration) dialect.Statements {
	_, st := d.pinned()
	renameTable(reflect.ValueOf(&st).Elem(), table)
	return st
}

// renameTable writes table for previousTable in every string of v, a
// dialect.Statements or its Run.
func renameTable(v reflect.Value, table string) {
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.String:
			f.SetString(strings.ReplaceAll(f.String(), previousTable, table))
		case reflect.Struct:
			renameTable(f, table)
		}
	}
}

// Capabilities are the dialect's: the version did not change them.
func (d previousDialect) Capabilities() dialect.Capabilities {
	return dialect.CapabilitiesOf(d.Dialect)
}

// TestPreviousStatementsArePinned checks that previousDialect sends what
// the version before incarnations sent and nothing of this one: its claim
// binds no {incarnation}, and its schema makes no such column. The MySQL
// dialect's first claim procedure, which that version created, is still
// among what Migrate creates, byte for byte (see dialect.MySQL).
func TestPreviousStatementsArePinned(t *testing.T) {
	for _, d := range []idem.Dialect{idem.SQLite(), idem.Postgres(), idem.MySQL(), idem.MariaDB(), idem.TiDB(), idem.Vitess()} {
		t.Run(d.Name(), func(t *testing.T) {
			old := previousDialect{d}
			store, err := idem.New(old)
			if err != nil {
				t.Fatal(err)
			}
			for name, q := range store.Queries() {
				if strings.Contains(q.SQL, "incarnation") {
					t.Errorf("the previous version's %s mentions the incarnation:\n%s", name, q.SQL)
				}
			}
			for _, q := range old.Schema("t") {
				if strings.Contains(q, "incarnation") {
					t.Errorf("the previous version's schema mentions the incarnation:\n%s", q)
				}
			}
			if d.Name() != "mysql" {
				return
			}
			first := old.Schema(idem.DefaultTable)[1]
			if !strings.Contains(first, "_claim`(") {
				t.Fatalf("the previous version's second statement is not its claim procedure:\n%s", first)
			}
			if !strings.Contains(strings.Join(d.Schema(idem.DefaultTable), "\n;\n"), first) {
				t.Errorf("the MySQL dialect's schema no longer creates the previous version's claim procedure as it was:\n%s", first)
			}
		})
	}
}

// TestRollingUpgrade runs the binaries of two versions on one table, as a
// rolling upgrade does: a Store with the statements of the version before
// incarnations (previousDialect; on MySQL, its claim procedure) writes
// records in the table of that version, a Store of this version fails to
// claim until Migrate of this version adds the column (and the MySQL
// dialect's new procedure), and then each Store
// claims, replays, resumes and takes over the other's records. The
// records that the old binaries create hold incarnation 0 and keep it;
// those that the new ones create get their own, which the old binaries'
// phases and resumes keep. An old binary's takeover of an expired record
// writes no incarnation and so leaves the expired record's
// (docs/operations.md, "Upgrading the table"); the new binaries' takeover
// writes a new one.
func TestRollingUpgrade(t *testing.T) {
	upgrade := func(t *testing.T, tg target) {
		ctx := context.Background()
		db := tg.Open(t)
		c := &dbtest.Clock{}
		opts := []idem.Option{idem.WithClock(c.Now), idem.WithLockTimeout(time.Second), idem.WithRetention(time.Hour)}
		e := dbtest.Setup(t, previousDialect{tg.Dialect}, db, opts...)
		old := e.Store
		down := errors.New("the provider is down")
		respond := func(resp idem.Response) idem.Func {
			return func(context.Context, *sql.Tx) (idem.Response, error) { return resp, nil }
		}
		steps := func(call func(context.Context, string) error) []idem.Step {
			return []idem.Step{
				idem.Phase("reserve", func(context.Context, *sql.Tx) error { return nil }),
				idem.Call("charge", call),
				idem.Final("confirm", func(context.Context, *sql.Tx) (idem.Response, error) { return dbtest.Created, nil }),
			}
		}
		succeed := func(context.Context, string) error { return nil }
		fail := func(context.Context, string) error { return down }
		want := func(what string, res idem.Result, err error, outcome idem.Outcome, incarnation int64) {
			t.Helper()
			if err != nil || res.Outcome != outcome {
				t.Fatalf("%s: %v %v, want %v", what, res.Outcome, err, outcome)
			}
			if res.Incarnation != incarnation {
				t.Errorf("%s: incarnation %d, want %d", what, res.Incarnation, incarnation)
			}
		}
		fresh := func(what string, res idem.Result, err error, outcome idem.Outcome) int64 {
			t.Helper()
			if err != nil || res.Outcome != outcome {
				t.Fatalf("%s: %v %v, want %v", what, res.Outcome, err, outcome)
			}
			if res.Incarnation == 0 {
				t.Errorf("%s: incarnation 0, want one of the record's own", what)
			}
			return res.Incarnation
		}

		// Before the upgrade, the old binaries write records.
		res, err := old.DoTx(ctx, db, nil, "old-finished", dbtest.HashA, respond(dbtest.Created))
		want("the old binary's claim", res, err, idem.Claimed, 0)
		if _, err := old.Run(ctx, db, nil, "old-unfinished", dbtest.HashA, steps(fail)...); !errors.Is(err, down) {
			t.Fatalf("the old binary's Run with a failing call: %v, want its error", err)
		}
		res, err = old.DoTx(ctx, db, nil, "old-expired", dbtest.HashA, respond(dbtest.Created))
		want("the old binary's claim of a key to expire", res, err, idem.Claimed, 0)

		// The upgrade: this version's Migrate, as a new binary runs it
		// first, while the old ones go on. A new binary's claim needs it.
		store := dbtest.NewStore(t, tg.Dialect, e.Table, opts...)
		if _, err := store.DoTx(ctx, db, nil, "too-early", dbtest.HashA, respond(dbtest.Created)); err == nil {
			t.Fatal("the new binary's claim before Migrate succeeded, want the missing column's error")
		} else if tg.Dialect.Name() == "mysql" && !strings.Contains(err.Error(), "run it first") {
			t.Errorf("the new binary's claim before Migrate: %v, want the hint to run Migrate", err)
		}
		if err := store.Migrate(ctx, db); err != nil {
			t.Fatalf("Migrate over the previous version's table: %v", err)
		}

		// The old records read 0, and keep it when the new binaries
		// resume them.
		// vtgate learns of Migrate's new columns from the shards a moment
		// later (its schema tracking), and until then refuses a statement
		// that names them (1054); a replay does nothing, and can go again.
		for deadline := time.Now().Add(2 * time.Minute); ; {
			res, err = store.DoTx(ctx, db, nil, "old-finished", dbtest.HashA, dbtest.MustNotRun(t))
			if err == nil || tg.Dialect.Name() != "vitess" || !strings.Contains(err.Error(), "Error 1054") || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		want("the new binary's replay of the old record", res, err, idem.Replay, 0)
		res, err = store.Run(ctx, db, nil, "old-unfinished", dbtest.HashA, steps(succeed)...)
		want("the new binary's resume of the old request", res, err, idem.Claimed, 0)

		// The old binaries go on, beside the new ones, on the same table.
		res, err = old.DoTx(ctx, db, nil, "old-after", dbtest.HashA, respond(dbtest.Created))
		want("the old binary's claim after the upgrade", res, err, idem.Claimed, 0)
		res, err = store.Lookup(ctx, db, "old-after")
		want("the new binary's lookup of the old binary's record", res, err, idem.Replay, 0)
		res, err = store.DoTx(ctx, db, nil, "new", dbtest.HashA, respond(dbtest.Created))
		newKey := fresh("the new binary's claim", res, err, idem.Claimed)
		res, err = old.DoTx(ctx, db, nil, "new", dbtest.HashA, dbtest.MustNotRun(t))
		want("the old binary's replay of the new record", res, err, idem.Replay, 0) // it reads none
		res, err = store.Lookup(ctx, db, "new")
		want("the new binary's lookup of its record", res, err, idem.Replay, newKey)

		// A request that a new binary began, an old one resumes: the
		// record keeps its incarnation.
		if _, err := store.Run(ctx, db, nil, "new-unfinished", dbtest.HashA, steps(fail)...); !errors.Is(err, down) {
			t.Fatalf("the new binary's Run with a failing call: %v, want its error", err)
		}
		res, err = store.Lookup(ctx, db, "new-unfinished")
		began := fresh("the new binary's unfinished request", res, err, idem.InFlight)
		res, err = old.Run(ctx, db, nil, "new-unfinished", dbtest.HashA, steps(succeed)...)
		want("the old binary's resume of the new request", res, err, idem.Claimed, 0)
		res, err = store.Lookup(ctx, db, "new-unfinished")
		want("the new binary's lookup of the request the old one finished", res, err, idem.Replay, began)

		// Expired records: the new binaries' takeover writes an
		// incarnation, the old ones' leaves the record's as it was.
		c.Advance(2 * time.Hour)
		res, err = store.DoTx(ctx, db, nil, "old-expired", dbtest.HashB, respond(dbtest.Created))
		fresh("the new binary's takeover of the old binary's expired record", res, err, idem.Claimed)
		res, err = old.DoTx(ctx, db, nil, "new", dbtest.HashB, respond(dbtest.Created))
		want("the old binary's takeover of the new binary's expired record", res, err, idem.Claimed, 0)
		res, err = store.Lookup(ctx, db, "new")
		want("the new binary's lookup of the record that the old one took over", res, err, idem.Replay, newKey)
	}
	dbtest.ForEachPooled(t, upgrade)
	dbtest.ForEachVitess(t, upgrade)
	dbtest.ForEachCitus(t, upgrade)
}
