package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// migrateCallers is how many processes TestMigrateConcurrent starts at
// once, and migrateRounds how many times it does so on each table.
const (
	migrateCallers = 8
	migrateRounds  = 3
)

// TestMigrateConcurrent starts Store.Migrate in several services at once,
// as a deploy that starts them together does: each on a *sql.DB of its own,
// so on connections of its own, all let go by one barrier after their
// connections are open. Every call must succeed and leave the very table
// that one Migrate makes, both where there is no table yet (the servers'
// CREATE TABLE and CREATE INDEX ... IF NOT EXISTS are not atomic, and
// PostgreSQL's collide in its catalog) and on a table made by the first
// version, where every caller finds the newer columns missing and adds them
// (MySQL, MariaDB and SQLite answer all but the first with a duplicate
// column). Each round is a table of its own.
func TestMigrateConcurrent(t *testing.T) {
	dbtest.ForEachWithTiDB(t, func(t *testing.T, tg target) {
		skipOptimisticTiDB(t, tg)
		db, dsn := tg.OpenDSN(t)
		want := describe(t, db, tg.Family, migratedTable(t, db, tg.Dialect))
		for _, old := range []bool{false, true} {
			name := "fresh"
			if old {
				name = "old table"
			}
			t.Run(name, func(t *testing.T) {
				dbs := make([]*sql.DB, migrateCallers)
				for i := range dbs {
					dbs[i] = openPinged(t, tg.Driver, dsn)
				}
				for round := 1; round <= migrateRounds; round++ {
					table := dbtest.NewTable(t, db, "idem_conc_")
					if old {
						execAll(t, db, "00001 up", loadMigrations(t, tg.Family, "goose", table)[0].up)
					}
					store := dbtest.NewStore(t, tg.Dialect, table)
					errs := startTogether(len(dbs), func(i int) error { return store.Migrate(context.Background(), dbs[i]) })
					for i, err := range errs {
						if err != nil {
							t.Errorf("round %d, caller %d: Migrate: %v", round, i, err)
						}
					}
					if got := describe(t, db, tg.Family, table); !reflect.DeepEqual(got, want) {
						t.Fatalf("round %d: after %d Migrate calls at once the table is\n%v\none Migrate makes\n%v", round, len(dbs), got, want)
					}
				}
			})
		}
	})
}

// TestMigrateOtherErrorsFail shows that Migrate, which takes the errors of
// a concurrent caller's work (an object or column that appeared under it)
// as done, still fails on any other: here, a view stands where the table
// should be, and the server refuses to index or alter it.
func TestMigrateOtherErrorsFail(t *testing.T) {
	dbtest.ForEachWithTiDB(t, func(t *testing.T, tg target) {
		skipOptimisticTiDB(t, tg)
		db := tg.Open(t)
		table := dbtest.NewTable(t, db, "idem_view_")
		if _, err := db.ExecContext(context.Background(), "CREATE VIEW "+table+" AS SELECT 1 AS one"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP VIEW IF EXISTS "+table) })
		err := dbtest.NewStore(t, tg.Dialect, table).Migrate(context.Background(), db)
		if err == nil || !isDriverError(err) || errors.Is(err, idem.ErrRetry) {
			t.Fatalf("Migrate with a view in the table's place: %v, want the server's error", err)
		}
	})
}

// skipOptimisticTiDB skips TiDB's optimistic target, whose transaction
// mode changes nothing about DDL, which TiDB runs as jobs of their own,
// outside any transaction. Its dialect is the tests' wrapper around
// idem.MySQL(), which Migrate cannot tell from a third party's dialect, and
// which therefore has no upgrades.
func skipOptimisticTiDB(t *testing.T, tg target) {
	t.Helper()
	if tg.Name == "tidb/optimistic" {
		t.Skip("DDL does not depend on TiDB's transaction mode, and Migrate upgrades nothing through this target's wrapped dialect; the tidb target runs it")
	}
}

// openPinged opens a database of its own on dsn, with its connection open
// already, closed at the end of t.
func openPinged(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

// startTogether runs f(0) to f(n-1) in goroutines that it lets go at once,
// after all of them have started, and returns their errors.
func startTogether(n int, f func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			errs[i] = f(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return errs
}
