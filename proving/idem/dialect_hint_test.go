package idem_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestWrongDialectHint shows that a Store made with the dialect of another
// database than the one it talks to fails with a hint that names the
// server's family and the dialect to use, not with a bare syntax error.
func TestWrongDialectHint(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		wrong, want := idem.Postgres(), "MySQL-family's"
		switch tg.Family {
		case "postgres":
			wrong, want = idem.MariaDB(), "PostgreSQL's"
		case "sqlite":
			want = "SQLite's"
		}
		db := tg.Open(t)
		err := dbtest.NewStore(t, wrong, dbtest.NewTable(t, db, "idem_wrong_")).Migrate(context.Background(), db)
		if err == nil || !strings.Contains(err.Error(), "the error is "+want) {
			t.Fatalf("Migrate with the %s dialect on %s: %v, want a hint that names %s", wrong.Name(), tg.Name, err, want)
		}
		t.Log(err)
	})
}
