package idem_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"reflect"
	"regexp"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

// storeStatements returns a counter that names store's statements, and a
// function that takes the names of those sent since its last call.
func storeStatements(store *idem.Store) (*stmtCounter, func() []string) {
	c := &stmtCounter{names: map[string]string{}}
	c.nameStatements(store)
	return c, func() []string {
		seen, _ := c.take()
		var names []string
		for _, n := range seen {
			if n != "other" {
				names = append(names, n)
			}
		}
		return names
	}
}

// countedDB opens the database of base and dsn through a driver wrapper that
// counts store's statements, and returns it with the function that takes
// their names.
func countedDB(t *testing.T, base driver.Driver, dsn string, store *idem.Store) (*sql.DB, func() []string) {
	c, take := storeStatements(store)
	db := sql.OpenDB(stmtCountingConnector{base: base, dsn: dsn, c: c})
	t.Cleanup(func() { db.Close() })
	return db, take
}

// countedMock returns a sqlmock database counted as countedDB counts, with
// its Sqlmock and an idemtest.Mock for store.
func countedMock(t *testing.T, store *idem.Store) (*sql.DB, func() []string, sqlmock.Sqlmock, *idemtest.Mock) {
	dsn := "idem-" + randomName()
	mdb, mock, err := sqlmock.NewWithDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mdb.Close() })
	db, take := countedDB(t, mdb.Driver(), dsn, store)
	return db, take, mock, idemtest.NewMock(mock, store)
}

// TestMockMatchesDatabase checks idemtest.Mock against the real databases:
// for each outcome, Do must run the same statements, in the same order,
// against the mock as against the database.
func TestMockMatchesDatabase(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithLockTimeout(0))
		ctx := context.Background()
		real, take := countedDB(t, e.db.Driver(), e.dsn, e.store)

		// What the database does for each outcome.
		got := map[idem.Outcome][]string{}
		run := func(db *sql.DB, key string, hash []byte, fn idem.Func) idem.Outcome {
			t.Helper()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.store.Do(ctx, tx, key, hash, fn)
			if err != nil {
				t.Fatalf("Do(%s): %v", key, err)
			}
			if res.Outcome == idem.Claimed {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			return res.Outcome
		}
		insert := sprintf(tg.insertEffect, e.effects)
		fn := e.effect("k", created)
		for _, o := range []struct {
			hash []byte
			want idem.Outcome
		}{{hashA, idem.Claimed}, {hashA, idem.Replay}, {hashB, idem.Mismatch}} {
			if got := run(real, "k", o.hash, fn); got != o.want {
				t.Fatalf("outcome %v, want %v", got, o.want)
			}
			got[o.want] = take()
		}
		if tg.dialect.Name() == "sqlite" {
			// SQLite never sees a key held by another writer; a record
			// committed unfinished is its one way to InFlight.
			q := "INSERT INTO " + e.table + " (key, request_hash, created_at, expires_at) VALUES (?, ?, 0, 9223372036854775807)"
			if _, err := e.db.ExecContext(ctx, q, []byte("held"), hashA); err != nil {
				t.Fatal(err)
			}
		} else {
			e.hold(t, "held")
		}
		take()
		if o := run(real, "held", hashA, fn); o != idem.InFlight {
			t.Fatalf("outcome %v, want InFlight", o)
		}
		got[idem.InFlight] = take()

		// What the mock expects for each.
		mocked, mtake, mock, m := countedMock(t, e.store)
		for _, o := range []struct {
			outcome idem.Outcome
			key     string
			expect  func()
		}{
			{idem.Claimed, "k", func() {
				m.ExpectDo("k", hashA)
				mock.ExpectExec(regexp.QuoteMeta(insert)).WillReturnResult(sqlmock.NewResult(1, 1))
				m.ExpectComplete("k", hashA, created)
			}},
			{idem.Replay, "k", func() { m.ExpectDo("k", hashA).WillReplay(created) }},
			{idem.Mismatch, "k", func() { m.ExpectDo("k", hashA).WillMismatch() }},
			{idem.InFlight, "held", func() { m.ExpectDo("held", hashA).WillBeInFlight() }},
		} {
			mock.ExpectBegin()
			o.expect()
			if o.outcome == idem.Claimed {
				mock.ExpectCommit()
			} else {
				mock.ExpectRollback()
			}
			if out := run(mocked, o.key, hashA, fn); out != o.outcome {
				t.Errorf("mock: outcome %v, want %v", out, o.outcome)
			}
			if seen := mtake(); !reflect.DeepEqual(seen, got[o.outcome]) {
				t.Errorf("%v: the mock expects %v, the database runs %v", o.outcome, seen, got[o.outcome])
			}
		}
		if err := mock.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
	})
}

// TestMockMatchesDatabaseLookupFirst does the same for DoTx on a store made
// WithLookupFirst, transactions included.
func TestMockMatchesDatabaseLookupFirst(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithLookupFirst())
		insert := sprintf(tg.insertEffect, e.effects)
		run := func(db *sql.DB, hash []byte) idem.Outcome {
			t.Helper()
			res, err := e.store.DoTx(context.Background(), db, nil, "k", hash, e.effect("k", created))
			if err != nil {
				t.Fatalf("DoTx: %v", err)
			}
			return res.Outcome
		}
		real, take := countedDB(t, e.db.Driver(), e.dsn, e.store)
		mocked, mtake, mock, m := countedMock(t, e.store)
		for _, o := range []struct {
			hash   []byte
			want   idem.Outcome
			expect func()
		}{
			{hashA, idem.Claimed, func() {
				m.ExpectLookupFirst("k", hashA)
				mock.ExpectBegin()
				m.ExpectDo("k", hashA)
				mock.ExpectExec(regexp.QuoteMeta(insert)).WillReturnResult(sqlmock.NewResult(1, 1))
				m.ExpectComplete("k", hashA, created)
				mock.ExpectCommit()
			}},
			{hashA, idem.Replay, func() { m.ExpectLookupFirst("k", hashA).WillReplay(created) }},
			{hashB, idem.Mismatch, func() { m.ExpectLookupFirst("k", hashB).WillMismatch() }},
		} {
			if got := run(real, o.hash); got != o.want {
				t.Fatalf("outcome %v, want %v", got, o.want)
			}
			want := take()
			o.expect()
			if got := run(mocked, o.hash); got != o.want {
				t.Errorf("mock: outcome %v, want %v", got, o.want)
			}
			if seen := mtake(); !reflect.DeepEqual(seen, want) {
				t.Errorf("%v: the mock expects %v, the database runs %v", o.want, seen, want)
			}
		}
		if err := mock.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
	})
}
