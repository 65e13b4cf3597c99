package main

import (
	"context"
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
