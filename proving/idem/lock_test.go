package idem_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestInFlightOnEveryIsolationLevel holds a key in one transaction and
// claims it through Do, DoTx and Run at each isolation level that the
// server accepts: the answer is InFlight within the bound that the
// documentation states, max(the lock timeout rounded up to whole seconds,
// the dialect's MinLockWait) + 1 s, with Do's transaction still usable. The
// wrong answers take far longer: a read that waits the session's own lock
// wait (50 s on the MySQL family, where a plain SELECT locks under
// SERIALIZABLE), or the lock timeout twice.
func TestInFlightOnEveryIsolationLevel(t *testing.T) {
	each := func(f func(t *testing.T, tg target)) {
		dbtest.ForEachRunTarget(t, f)
		dbtest.ForEachVitess(t, f)
	}
	each(func(t *testing.T, tg target) {
		c := dialect.CapabilitiesOf(tg.Dialect)
		if c.OneWriter {
			t.Skip("SQLite has one writer at a time: a second claimer waits at BEGIN (TestIsolation/sqlite)")
		}
		const lockTimeout = 1500 * time.Millisecond // waits 2 s
		bound := max((lockTimeout+time.Second-1)/time.Second*time.Second, c.MinLockWait) + time.Second
		e := setup(t, tg, idem.WithLockTimeout(lockTimeout))
		ctx := context.Background()
		e.Hold(t, "held", dbtest.HashA, dbtest.Created) // rolled back when the subtests are done
		calls := []struct {
			name string
			call func(*sql.TxOptions) (idem.Result, error)
		}{
			{"Do", func(opts *sql.TxOptions) (idem.Result, error) {
				tx, err := e.DB.BeginTx(ctx, opts)
				if err != nil {
					return idem.Result{}, err
				}
				defer func() { _ = tx.Rollback() }()
				res, err := e.Store.Do(ctx, tx, "held", dbtest.HashA, dbtest.MustNotRun(t))
				var one int
				if qerr := tx.QueryRowContext(ctx, "SELECT 1").Scan(&one); qerr != nil {
					t.Errorf("the transaction is not usable after InFlight: %v", qerr)
				}
				return res, err
			}},
			{"DoTx", func(opts *sql.TxOptions) (idem.Result, error) {
				return e.Store.DoTx(ctx, e.DB, opts, "held", dbtest.HashA, dbtest.MustNotRun(t))
			}},
			{"Run", func(opts *sql.TxOptions) (idem.Result, error) {
				return e.Store.Run(ctx, e.DB, opts, "held", dbtest.HashA, idem.Final("final", dbtest.MustNotRun(t)))
			}},
		}
		type claim struct {
			name    string
			call    func(*sql.TxOptions) (idem.Result, error)
			opts    *sql.TxOptions
			res     idem.Result
			err     error
			elapsed time.Duration
		}
		var claims []*claim
		for _, level := range []sql.IsolationLevel{sql.LevelReadUncommitted, sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable} {
			if level == sql.LevelReadUncommitted && c.KeepsIsolation {
				// Its session would read uncommitted records ever after,
				// and the Store refuses it: TestOutsideReadSeesCommittedOnly.
				t.Logf("%v: the session would keep it", level)
				continue
			}
			opts := &sql.TxOptions{Isolation: level}
			tx, err := e.DB.BeginTx(ctx, opts)
			if err != nil {
				t.Logf("%v: the server refuses it: %v", level, err)
				continue
			}
			_ = tx.Rollback()
			for _, c := range calls {
				claims = append(claims, &claim{name: level.String() + "/" + c.name, call: c.call, opts: opts})
			}
		}
		// Each claim waits for the holder on its own, so they wait
		// together. A busy machine can stall one past the bound; a
		// claim that goes past it twice in a row waited too long.
		for attempt := 1; len(claims) > 0; attempt++ {
			var wg sync.WaitGroup
			for _, c := range claims {
				wg.Add(1)
				go func() {
					defer wg.Done()
					start := time.Now()
					c.res, c.err = c.call(c.opts)
					c.elapsed = time.Since(start)
				}()
			}
			wg.Wait()
			var late []*claim
			for _, c := range claims {
				if c.err != nil || c.res.Outcome != idem.InFlight {
					t.Errorf("%s: %v, %v, want InFlight", c.name, c.res.Outcome, c.err)
				} else if c.elapsed > bound && attempt == 2 {
					t.Errorf("%s: InFlight after %v, want it within %v", c.name, c.elapsed, bound)
				} else if c.elapsed > bound {
					t.Logf("%s: InFlight after %v, past %v: once more", c.name, c.elapsed, bound)
					late = append(late, c)
				}
			}
			claims = late
		}
	})
}

// TestPostgresLockSameForEverySpelling claims a key through stores that
// spell one table differently: they must take the same advisory lock, or the
// second claim waits for the row itself, unbounded by the lock timeout. One
// of them runs on a connection whose search_path leaves the table's schema
// out, where PostgreSQL names the table only with its schema. It runs on
// Citus too, whose coordinator and workers each have an OID of their own
// for the table.
func TestPostgresLockSameForEverySpelling(t *testing.T) {
	f := func(t *testing.T, tg target) {
		if tg.Family != "postgres" {
			t.Skip("PostgreSQL only: the lock number is its advisory lock")
		}
		e := setup(t, tg)
		qualified, err := idem.New(tg.Dialect, idem.WithTable("public."+e.Table), idem.WithLockTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		elsewhere, err := sql.Open(tg.Driver, dbtest.WithParams(e.DSN, "search_path=pg_catalog"))
		if err != nil {
			t.Fatal(err)
		}
		defer elsewhere.Close()
		holder := e.Hold(t, "held", dbtest.HashA, dbtest.Created)
		for _, c := range []struct {
			name string
			db   *sql.DB
		}{{"public.T", e.DB}, {"public.T, search_path=pg_catalog", elsewhere}} {
			// Without the shared lock the claim waits until the holder
			// ends; the deadline turns that wait into an error instead
			// of a hang.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res, err := qualified.DoTx(ctx, c.db, nil, "held", dbtest.HashA, dbtest.MustNotRun(t))
			cancel()
			if err != nil || res.Outcome != idem.InFlight {
				t.Errorf("%s: %v, %v; want InFlight", c.name, res.Outcome, err)
			}
		}
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	dbtest.ForEachTarget(t, f)
	dbtest.ForEachCitus(t, f)
}

// TestPostgresUserLockTimeout gives the caller's transaction a lock_timeout
// of its own that fires during the claim. The claim never waits on the
// advisory lock, but its insert waits for a row that a writer outside idem
// (or a process of an earlier release, whose lock number differs) inserted
// and has not committed. PostgreSQL aborts the transaction, so Do must
// answer ErrRetry, never InFlight with a transaction that cannot go on.
func TestPostgresUserLockTimeout(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		if tg.Family != "postgres" {
			t.Skip("PostgreSQL only")
		}
		e := setup(t, tg)
		ctx := context.Background()
		writer := e.Begin(t, nil)
		if _, err := writer.ExecContext(ctx, "INSERT INTO "+e.Table+" (key, request_hash, created_at, expires_at) VALUES ($1, $2, 0, $3)",
			[]byte("k"), dbtest.HashA, time.Now().Add(time.Hour).UnixMicro()); err != nil {
			t.Fatal(err)
		}
		tx := e.Begin(t, nil)
		if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = '100ms'"); err != nil {
			t.Fatal(err)
		}
		_, err := e.Store.Do(ctx, tx, "k", dbtest.HashA, dbtest.MustNotRun(t))
		wantRetry(t, err)
		if _, err := tx.ExecContext(ctx, "SELECT 1"); err == nil {
			t.Error("the transaction went on after the lock timeout; PostgreSQL should have aborted it")
		}
		if err := writer.Rollback(); err != nil {
			t.Fatal(err)
		}
		res, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, e.Effect("k", dbtest.Created))
		if err != nil || res.Outcome != idem.Claimed {
			t.Fatalf("DoTx after the writer left = %v, %v; want Claimed", res.Outcome, err)
		}
	})
}
