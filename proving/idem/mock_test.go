package idem_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/proving/dbtest"
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
	dsn := "idem-" + dbtest.RandomName()
	mdb, mock, err := sqlmock.NewWithDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mdb.Close() })
	db, take := countedDB(t, mdb.Driver(), dsn, store)
	return db, take, mock, idemtest.NewMock(mock, store)
}

// TestMockMatchesDatabase checks idemtest.Mock against the real databases:
// for each outcome, Do must give the same answer against the mock as against
// the database, and the statements the mock expects must be the ones Do
// sends to the database, in the same order. A claim that wins runs exactly
// as on the database. A claim that loses, the mock makes lose in the claim
// statement itself, for every dialect, while a database may make Do look
// the record up after it (see lostLikeMock).
func TestMockMatchesDatabase(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithLockTimeout(0))
		ctx := context.Background()
		real, take := countedDB(t, e.DB.Driver(), e.DSN, e.Store)

		// What the database does for each outcome.
		got := map[idem.Outcome][]string{}
		run := func(db *sql.DB, key string, hash []byte, fn idem.Func) (idem.Outcome, error) {
			t.Helper()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Store.Do(ctx, tx, key, hash, fn)
			if err == nil && res.Outcome == idem.Claimed {
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			} else if rerr := tx.Rollback(); rerr != nil {
				t.Fatal(rerr)
			}
			return res.Outcome, err
		}
		mustRun := func(db *sql.DB, key string, hash []byte, fn idem.Func) idem.Outcome {
			t.Helper()
			o, err := run(db, key, hash, fn)
			if err != nil {
				t.Fatalf("Do(%s): %v", key, err)
			}
			return o
		}
		insert := e.Effects.InsertSQL()
		fn := e.Effect("k", dbtest.Created)
		for _, o := range []struct {
			hash []byte
			want idem.Outcome
		}{{dbtest.HashA, idem.Claimed}, {dbtest.HashA, idem.Replay}, {dbtest.HashB, idem.Mismatch}} {
			if got := mustRun(real, "k", o.hash, fn); got != o.want {
				t.Fatalf("outcome %v, want %v", got, o.want)
			}
			got[o.want] = take()
		}
		if dialect.CapabilitiesOf(tg.Dialect).OneWriter {
			// SQLite never sees a key held by another writer; a record
			// committed unfinished is its one way to InFlight.
			q := "INSERT INTO " + e.Table + " (key, request_hash, created_at, expires_at) VALUES (?, ?, 0, 9223372036854775807)"
			if _, err := e.DB.ExecContext(ctx, q, []byte("held"), dbtest.HashA); err != nil {
				t.Fatal(err)
			}
		} else {
			e.Hold(t, "held", dbtest.HashA, dbtest.Created)
		}
		take()
		if o := mustRun(real, "held", dbtest.HashA, fn); o != idem.InFlight {
			t.Fatalf("outcome %v, want InFlight", o)
		}
		got[idem.InFlight] = take()

		// The claim's statements, from BEGIN to its last: those of the
		// claimed run before its complete.
		claim := got[idem.Claimed]
		if n := len(claim); n == 0 || claim[n-1] != "Complete" {
			t.Fatalf("a claimed run sends %v, want the complete last", claim)
		}
		claim = claim[:len(claim)-1]
		for o, seq := range got {
			if o == idem.Claimed {
				continue
			}
			if err := lostLikeMock(seq, claim); err != nil {
				t.Errorf("%v: %v", o, err)
			}
		}

		// What the mock expects for each.
		mocked, mtake, mock, m := countedMock(t, e.Store)
		for _, o := range []struct {
			outcome idem.Outcome
			key     string
			expect  func()
		}{
			{idem.Claimed, "k", func() {
				m.ExpectDo("k", dbtest.HashA)
				mock.ExpectExec(regexp.QuoteMeta(insert)).WillReturnResult(sqlmock.NewResult(1, 1))
				m.ExpectComplete("k", dbtest.HashA, dbtest.Created)
			}},
			{idem.Replay, "k", func() { m.ExpectDo("k", dbtest.HashA).WillReplay(dbtest.Created) }},
			{idem.Mismatch, "k", func() { m.ExpectDo("k", dbtest.HashA).WillMismatch() }},
			{idem.InFlight, "held", func() { m.ExpectDo("held", dbtest.HashA).WillBeInFlight() }},
		} {
			mock.ExpectBegin()
			o.expect()
			if o.outcome == idem.Claimed {
				mock.ExpectCommit()
			} else {
				mock.ExpectRollback()
			}
			if out := mustRun(mocked, o.key, dbtest.HashA, fn); out != o.outcome {
				t.Errorf("mock: outcome %v, want %v", out, o.outcome)
			}
			want := claim
			if o.outcome == idem.Claimed {
				want = got[idem.Claimed]
			}
			if seen := mtake(); !reflect.DeepEqual(seen, want) {
				t.Errorf("%v: the mock expects %v, want %v (the database runs %v)", o.outcome, seen, want, got[o.outcome])
			}
		}

		// A conflict in the claim: the same statements, the reset of the
		// lock wait included, and an error that DoTx runs again for.
		mock.ExpectBegin()
		m.ExpectDo("k", dbtest.HashA).WillConflict()
		mock.ExpectRollback()
		if _, err := run(mocked, "k", dbtest.HashA, fn); !errors.Is(err, idem.ErrRetry) {
			t.Errorf("mock: WillConflict: Do: %v, want ErrRetry", err)
		}
		if seen := mtake(); !reflect.DeepEqual(seen, claim) {
			t.Errorf("conflict: the mock expects %v, want %v", seen, claim)
		}
		if err := mock.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
	})
}

// lostLikeMock checks the statements that a claim which lost sent to a
// database against claim, those of a claim that won (which are those the
// mock expects for every lost claim). A database's claim may report the
// loss through a lookup of the record of its own, or its dialect's
// ClaimLost and ClaimHeld, after the claim statement or after an error of
// its write: with those left out, what
// the database ran must be claim or claim with statements left out, it must
// begin as claim does, up to the claim's first statement, and where the
// claim ends by resetting the lock wait, it must end so too.
func lostLikeMock(seq, claim []string) error {
	var rest []string
	for _, n := range seq {
		if n != "Lookup" && n != "ClaimLost" && n != "ClaimHeld" {
			rest = append(rest, n)
		}
	}
	i := 0
	for _, n := range rest {
		for i < len(claim) && claim[i] != n {
			i++
		}
		if i == len(claim) {
			return fmt.Errorf("the database runs %v, not the statements of a claim, %v, with lookups", seq, claim)
		}
		i++
	}
	first := slices.IndexFunc(claim, func(n string) bool { return n == "ClaimWrite" || n == "Claim" })
	if first < 0 || len(seq) <= first || !slices.Equal(seq[:first+1], claim[:first+1]) {
		return fmt.Errorf("the database runs %v, which does not begin as a claim, %v, does", seq, claim)
	}
	return nil
}

func TestLostLikeMock(t *testing.T) {
	split := []string{"begin", "ClaimWrite", "Claim"}
	for _, c := range []struct {
		seq, claim []string
		ok         bool
	}{
		{[]string{"begin", "Claim"}, []string{"begin", "Claim"}, true},
		{[]string{"begin", "Claim", "Lookup"}, []string{"begin", "Claim"}, true},
		{[]string{"begin", "Claim", "ClaimLost"}, []string{"begin", "Claim"}, true},
		{[]string{"begin", "Claim", "ClaimLost", "ClaimHeld"}, []string{"begin", "Claim"}, true},
		{[]string{"begin", "ClaimHeld"}, []string{"begin", "Claim"}, false},
		{[]string{"begin", "ClaimLost"}, []string{"begin", "Claim"}, false},
		{split, split, true},
		{[]string{"begin", "ClaimWrite", "Lookup"}, split, true},
		{[]string{"begin", "ClaimWrite", "Claim", "Lookup"}, split, true},
		{[]string{"begin", "Lookup"}, []string{"begin", "Claim"}, false},
		{[]string{"begin", "Claim", "Abandon"}, []string{"begin", "Claim"}, false},
		{[]string{"begin", "Claim", "ClaimWrite"}, split, false},
	} {
		if err := lostLikeMock(c.seq, c.claim); (err == nil) != c.ok {
			t.Errorf("lostLikeMock(%v, %v) = %v, want ok %v", c.seq, c.claim, err, c.ok)
		}
	}
}

// TestMockMatchesDatabaseLookupFirst does the same for DoTx on a store of
// LookupAlways, transactions included.
func TestMockMatchesDatabaseLookupFirst(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithLookupFirst(idem.LookupAlways))
		insert := e.Effects.InsertSQL()
		run := func(db *sql.DB, hash []byte) idem.Outcome {
			t.Helper()
			res, err := e.Store.DoTx(context.Background(), db, nil, "k", hash, e.Effect("k", dbtest.Created))
			if err != nil {
				t.Fatalf("DoTx: %v", err)
			}
			return res.Outcome
		}
		real, take := countedDB(t, e.DB.Driver(), e.DSN, e.Store)
		mocked, mtake, mock, m := countedMock(t, e.Store)
		for _, o := range []struct {
			hash   []byte
			want   idem.Outcome
			expect func()
		}{
			{dbtest.HashA, idem.Claimed, func() {
				m.ExpectLookupFirst("k", dbtest.HashA)
				mock.ExpectBegin()
				m.ExpectDo("k", dbtest.HashA)
				mock.ExpectExec(regexp.QuoteMeta(insert)).WillReturnResult(sqlmock.NewResult(1, 1))
				m.ExpectComplete("k", dbtest.HashA, dbtest.Created)
				mock.ExpectCommit()
			}},
			{dbtest.HashA, idem.Replay, func() { m.ExpectLookupFirst("k", dbtest.HashA).WillReplay(dbtest.Created) }},
			{dbtest.HashB, idem.Mismatch, func() { m.ExpectLookupFirst("k", dbtest.HashB).WillMismatch() }},
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
