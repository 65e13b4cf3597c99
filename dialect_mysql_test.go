package idem_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// TestMySQLDialectHints shows what the MySQL dialect says when its claim's
// procedure is missing, and on TiDB, which cannot create it.
func TestMySQLDialectHints(t *testing.T) {
	forEachWithTiDB(t, func(t *testing.T, tg target) {
		if tg.Family != "mysql" || strings.HasSuffix(tg.Name, "/optimistic") {
			t.Skip("for the MySQL family's servers")
		}
		ctx := context.Background()
		if strings.HasPrefix(tg.Name, "tidb") {
			db := tg.Open(t)
			table := newTable(t, db, "idem_hint_")
			err := newStore(t, idem.MySQL(), table).Migrate(ctx, db)
			if err == nil || !strings.Contains(err.Error(), "use idem.TiDB()") {
				t.Fatalf("Migrate with the MySQL dialect on TiDB: %v, want an error that names idem.TiDB()", err)
			}
			t.Log(err)
			return
		}
		// A table that another dialect made: the procedure is not there.
		tg.Dialect = idem.MariaDB()
		e := setup(t, tg)
		store := newStore(t, idem.MySQL(), e.Table)
		tx := e.Begin(t, nil)
		_, err := store.Do(ctx, tx, "k", hashA, func(context.Context, *sql.Tx) (idem.Response, error) {
			t.Error("fn ran without a claim")
			return idem.Response{}, nil
		})
		if err == nil || !strings.Contains(err.Error(), "Migrate") {
			t.Fatalf("Do with the MySQL dialect and no procedure: %v, want an error that says to run Migrate", err)
		}
		t.Log(err)
	})
}
