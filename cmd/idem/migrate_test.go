package main

import (
	"context"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

func TestMigrate(t *testing.T) {
	forEach(t, func(t *testing.T, tb *testDB) {
		name := tb.Dialect.Name()
		r := runCmd(t, append([]string{"migrate"}, tb.args()...)...)
		r.wantCode(t, exitOK)
		equalLines(t, r.stdout, "created table "+tb.table+" and its index ("+name+")")

		r = runCmd(t, append([]string{"migrate"}, tb.args()...)...)
		r.wantCode(t, exitOK)
		equalLines(t, r.stdout, "table "+tb.table+" already exists ("+name+"); its index is in place")

		// The table is the one a Store needs.
		store, err := idem.New(tb.Dialect, idem.WithTable(tb.table))
		if err != nil {
			t.Fatal(err)
		}
		tb.put(t, store, "k", idem.Response{Status: 200})
		if _, err := store.Lookup(context.Background(), tb.db, "k"); err != nil {
			t.Fatalf("lookup after migrate: %v", err)
		}
	})
}

// TestMigrateAddsIncarnation: idem migrate upgrades a table with rows that
// an earlier version made, without the incarnation column (and, for the
// MySQL dialect, without the procedure that writes it): the old record
// reads incarnation 0, as inspect shows, and a new one gets its own.
func TestMigrateAddsIncarnation(t *testing.T) {
	forEach(t, func(t *testing.T, tb *testDB) {
		ctx := context.Background()
		store := tb.store(t)
		tb.dropClaimAtEnd(t)
		tb.put(t, store, "old", idem.Response{Status: 201})
		tb.exec(t, "ALTER TABLE {T} DROP COLUMN incarnation")
		if tb.Dialect.Name() == "mysql" {
			tb.exec(t, "DROP PROCEDURE "+tb.table+"_claim2")
		}

		r := runCmd(t, append([]string{"migrate"}, tb.args()...)...)
		r.wantCode(t, exitOK)
		equalLines(t, r.stdout, "table "+tb.table+" already exists ("+tb.Dialect.Name()+"); its index is in place")

		res, err := store.Lookup(ctx, tb.db, "old")
		if err != nil || res.Outcome != idem.Replay || res.Incarnation != 0 {
			t.Fatalf("lookup of the old record after migrate: %v %+v, want a replay of incarnation 0", err, res)
		}
		r = runCmd(t, append([]string{"inspect"}, tb.args("-key", "old")...)...)
		r.wantCode(t, exitOK)
		if !strings.Contains(r.stdout, "\nrecord   incarnation 0: created before the table had the column\n") {
			t.Errorf("inspect of the old record:\n%s", r.stdout)
		}
		tb.put(t, store, "new", idem.Response{Status: 201})
		tb.incarnation(t, store, "new")
	})
}
