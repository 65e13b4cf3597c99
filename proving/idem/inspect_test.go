package idem_test

import (
	"context"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/internal/sqltx"
	"github.com/idemgo/idem/proving/dbtest"
)

// currentSchema asks a database, for each built-in dialect, which schema an
// unqualified table name lands in: PostgreSQL's first schema on the
// search_path (public), the MySQL family's database, SQLite's main.
var currentSchema = map[idem.Dialect]string{
	idem.Postgres(): `SELECT current_schema()`,
	idem.MySQL():    `SELECT DATABASE()`,
	idem.MariaDB():  `SELECT DATABASE()`,
	idem.SQLite():   `SELECT 'main'`,
}

// Every built-in dialect tells whether its table exists, under its bare and
// its schema-qualified name, and measures it.
func TestTableInspector(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		ins, ok := tg.Dialect.(dialect.TableInspector)
		if !ok {
			t.Fatalf("the %s dialect does not implement dialect.TableInspector", tg.Dialect.Name())
		}
		e := setup(t, tg)
		ctx := context.Background()
		query, ok := currentSchema[tg.Dialect]
		if !ok {
			t.Fatalf("no query for the schema of the %s dialect", tg.Dialect.Name())
		}
		var schema string
		if err := e.DB.QueryRowContext(ctx, query).Scan(&schema); err != nil {
			t.Fatal(err)
		}
		missing := "idem_missing_" + dbtest.RandomName()

		for _, c := range []struct {
			table string
			want  bool
		}{
			{e.Table, true},
			{schema + "." + e.Table, true},
			{missing, false},
			{schema + "." + missing, false},
		} {
			got, err := ins.TableExists(ctx, sqltx.Of(e.DB), c.table)
			if err != nil || got != c.want {
				t.Errorf("TableExists(%s) = %v, %v; want %v", c.table, got, err, c.want)
			}
		}
		// The statements run in a transaction too.
		tx := e.Begin(t, nil)
		if got, err := ins.TableExists(ctx, sqltx.Of(tx), e.Table); err != nil || !got {
			t.Errorf("TableExists(%s) in a transaction = %v, %v; want true", e.Table, got, err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}

		if size, how, err := ins.TableSize(ctx, sqltx.Of(e.DB), missing); err != nil || size != 0 || how == "" {
			t.Errorf("TableSize(%s) = %d, %q, %v; want 0 and how it measured", missing, size, how, err)
		}
		for i := range 20 {
			key := "k-" + dbtest.RandomName()
			if _, err := e.Do(t, key, idem.Fingerprint([]byte(key)), e.Effect(key, idem.Response{Status: 201, Body: make([]byte, 500+i)}), true); err != nil {
				t.Fatal(err)
			}
		}
		for _, table := range []string{e.Table, schema + "." + e.Table} {
			size, how, err := ins.TableSize(ctx, sqltx.Of(e.DB), table)
			if err != nil || size <= 0 || how == "" {
				t.Errorf("TableSize(%s) after 20 records = %d, %q, %v; want a size > 0 and how it measured", table, size, how, err)
			}
			t.Logf("TableSize(%s) = %d bytes, %s", table, size, how)
		}
	})
}
