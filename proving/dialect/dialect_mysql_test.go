package dialect_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestMySQLDialectHints shows what the MySQL dialect says when its claim's
// procedure is missing, and on TiDB, which cannot create it.
func TestMySQLDialectHints(t *testing.T) {
	dbtest.ForEachWithTiDB(t, func(t *testing.T, tg dbtest.Target) {
		if tg.Family != "mysql" || strings.HasSuffix(tg.Name, "/optimistic") {
			t.Skip("for the MySQL family's servers")
		}
		ctx := context.Background()
		if strings.HasPrefix(tg.Name, "tidb") {
			db := tg.Open(t)
			table := dbtest.NewTable(t, db, "idem_hint_")
			err := dbtest.NewStore(t, idem.MySQL(), table).Migrate(ctx, db)
			if err == nil || !strings.Contains(err.Error(), "use idem.TiDB()") {
				t.Fatalf("Migrate with the MySQL dialect on TiDB: %v, want an error that names idem.TiDB()", err)
			}
			t.Log(err)
			return
		}
		// A table that another dialect made: the procedure is not there.
		tg.Dialect = idem.MariaDB()
		e := tg.Setup(t)
		store := dbtest.NewStore(t, idem.MySQL(), e.Table)
		tx := e.Begin(t, nil)
		_, err := store.Do(ctx, tx, "k", dbtest.HashA, func(context.Context, *sql.Tx) (idem.Response, error) {
			t.Error("fn ran without a claim")
			return idem.Response{}, nil
		})
		if err == nil || !strings.Contains(err.Error(), "Migrate") {
			t.Fatalf("Do with the MySQL dialect and no procedure: %v, want an error that says to run Migrate", err)
		}
		t.Log(err)
	})
}
