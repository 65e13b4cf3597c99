package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// after runs f in d, in the background, and waits for it at the end of the
// test. d is a delay, not a bound: load may stretch it, and every caller
// says why its test still holds when it does.
func after(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		time.Sleep(d)
		if err := f(); err != nil {
			t.Errorf("background: %v", err)
		}
	}()
}

// wantRetry fails the test unless err matches both ErrRetry and the
// driver's own error.
func wantRetry(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, idem.ErrRetry) || !isDriverError(err) {
		t.Fatalf("error = %v, want one that matches ErrRetry and the driver's error", err)
	}
}

// lostRace fails the test unless a lost race was answered as contract item 5
// allows: Replay, InFlight or ErrRetry.
func lostRace(t *testing.T, res idem.Result, err error) {
	t.Helper()
	switch {
	case err != nil:
		wantRetry(t, err)
	case res.Outcome == idem.Replay:
		dbtest.SameResponse(t, res.Response, dbtest.Created)
	case res.Outcome != idem.InFlight:
		t.Fatalf("a lost race was answered %v", res.Outcome)
	}
}

func TestIsolation(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		switch tg.Family {
		case "postgres":
			for _, level := range []sql.IsolationLevel{sql.LevelRepeatableRead, sql.LevelSerializable} {
				t.Run(level.String(), func(t *testing.T) { testPostgresIsolation(t, tg, level) })
			}
		case "mysql":
			testMySQLIsolation(t, tg)
		case "sqlite":
			testSQLiteBusy(t)
		}
	})
}

func testPostgresIsolation(t *testing.T, tg target, level sql.IsolationLevel) {
	ctx := context.Background()
	opts := &sql.TxOptions{Isolation: level}

	t.Run("claim committed after the snapshot", func(t *testing.T) {
		e := setup(t, tg)
		tx := e.Begin(t, opts)
		if _, err := tx.ExecContext(ctx, "SELECT count(*) FROM "+e.Effects.Table); err != nil {
			t.Fatal(err)
		}
		res, err := e.Do(t, "k", dbtest.HashA, e.Effect("k", dbtest.Created), true)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		_, err = e.Store.Do(ctx, tx, "k", dbtest.HashA, dbtest.MustNotRun(t))
		wantRetry(t, err)
	})

	t.Run("claim committed during the wait", func(t *testing.T) {
		e := setup(t, tg, idem.WithLockTimeout(10*time.Second))
		holder := e.Hold(t, "k", dbtest.HashA, dbtest.Created)
		tx := e.Begin(t, opts)
		// The commit comes 200 ms from now, 50 times inside the 10 s
		// lock timeout, so the claim normally sees it while it waits.
		// Nothing fails if load delays it: every answer to a lost race
		// (Replay, InFlight after the timeout, ErrRetry) is accepted.
		after(t, 200*time.Millisecond, holder.Commit)
		res, err := e.Store.Do(ctx, tx, "k", dbtest.HashA, dbtest.MustNotRun(t))
		lostRace(t, res, err)
	})

	t.Run("serialization failure in fn", func(t *testing.T) {
		e := setup(t, tg)
		counter := e.counter(t)
		tx := e.Begin(t, opts)
		_, err := e.Store.Do(ctx, tx, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			return dbtest.Created, counter.conflict(ctx, tx, true)
		})
		wantRetry(t, err)
	})

	t.Run("DoTx runs the transaction again", func(t *testing.T) {
		e := setup(t, tg)
		counter := e.counter(t)
		var attempts atomic.Int32
		res, err := e.Store.DoTx(ctx, e.DB, opts, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			first := attempts.Add(1) == 1
			if err := counter.conflict(ctx, tx, first); err != nil {
				return idem.Response{}, err
			}
			return e.Effect("k", dbtest.Created)(ctx, tx)
		})
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		if n := attempts.Load(); n != 2 {
			t.Errorf("fn ran %d times, want 2: one conflict, one success", n)
		}
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})

	if level == sql.LevelSerializable {
		t.Run("serialization failure at commit", func(t *testing.T) {
			e := setup(t, tg)
			// Two transactions that each read the effects and then add
			// one cannot both commit under SERIALIZABLE.
			var (
				ready sync.WaitGroup
				runs  atomic.Int32
				wg    sync.WaitGroup
			)
			ready.Add(2)
			for _, key := range []string{"a", "b"} {
				wg.Add(1)
				first := true
				go func() {
					defer wg.Done()
					res, err := e.Store.DoTx(ctx, e.DB, opts, key, dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
						runs.Add(1)
						if _, err := tx.ExecContext(ctx, "SELECT count(*) FROM "+e.Effects.Table); err != nil {
							return idem.Response{}, err
						}
						if first {
							first = false
							ready.Done()
							ready.Wait()
						}
						return e.Effect(key, dbtest.Created)(ctx, tx)
					})
					if err != nil || res.Outcome != idem.Claimed {
						t.Errorf("DoTx(%s) = %v, %v, want Claimed", key, res.Outcome, err)
					}
				}()
			}
			wg.Wait()
			if n := runs.Load(); n < 3 {
				t.Errorf("fn ran %d times, want a retry after the serialization failure", n)
			}
			for _, key := range []string{"a", "b"} {
				if n := e.EffectCount(t, key); n != 1 {
					t.Errorf("key %s: %d effect rows, want 1", key, n)
				}
			}
		})
	}
}

// counter is a row that two transactions can fight over.
type counter struct {
	e      *env
	update string
}

func (e *env) counter(t *testing.T) *counter {
	t.Helper()
	if err := e.Effects.Insert(context.Background(), e.DB, "counter", "0"); err != nil {
		t.Fatal(err)
	}
	return &counter{e: e, update: fmt.Sprintf("UPDATE %s SET note = note || 'x' WHERE k = %s", e.Effects.Table, e.Dialect.Placeholder(1))}
}

// conflict updates the counter in tx, after another transaction updated and
// committed it when first is true, which fails under REPEATABLE READ and
// SERIALIZABLE.
func (c *counter) conflict(ctx context.Context, tx *sql.Tx, first bool) error {
	key := dbtest.EffectKey("counter")
	if first {
		if _, err := c.e.DB.ExecContext(ctx, c.update, key); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, c.update, key)
	return err
}

func testMySQLIsolation(t *testing.T, tg target) {
	ctx := context.Background()

	t.Run("claim committed after an earlier read", func(t *testing.T) {
		e := setup(t, tg)
		tx := e.Begin(t, nil) // REPEATABLE READ, MariaDB's default
		if _, err := tx.ExecContext(ctx, "SELECT count(*) FROM "+e.Table); err != nil {
			t.Fatal(err)
		}
		res, err := e.Do(t, "k", dbtest.HashA, e.Effect("k", dbtest.Created), true)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		res, err = e.Store.Do(ctx, tx, "k", dbtest.HashA, dbtest.MustNotRun(t))
		dbtest.WantOutcome(t, res, err, idem.Replay)
		dbtest.SameResponse(t, res.Response, dbtest.Created)
	})

	t.Run("snapshot isolation conflict", func(t *testing.T) {
		e := setup(t, tg)
		conn, err := e.DB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "SET SESSION innodb_snapshot_isolation = ON"); err != nil {
			t.Skipf("this server has no innodb_snapshot_isolation: %v", err)
		}
		defer conn.ExecContext(ctx, "SET SESSION innodb_snapshot_isolation = OFF")
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "SELECT count(*) FROM "+e.Table); err != nil {
			t.Fatal(err)
		}
		res, err := e.Do(t, "k", dbtest.HashA, e.Effect("k", dbtest.Created), true)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		_, err = e.Store.Do(ctx, tx, "k", dbtest.HashA, dbtest.MustNotRun(t))
		wantRetry(t, err)
	})

	t.Run("deadlock among waiters", func(t *testing.T) {
		// When the holder rolls back, InnoDB resolves the waiters' lock
		// requests with a deadlock: one claims, the others get 1213.
		e := setup(t, tg, idem.WithLockTimeout(10*time.Second))
		holder := e.Hold(t, "k", dbtest.HashA, dbtest.Created)
		var (
			wg       sync.WaitGroup
			claimed  atomic.Int32
			retried  atomic.Int32
			waiters  = 3
			started  sync.WaitGroup
			rollback = make(chan struct{})
		)
		started.Add(waiters)
		for i := 0; i < waiters; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tx, err := e.DB.BeginTx(ctx, nil)
				if err != nil {
					t.Error(err)
					started.Done()
					return
				}
				defer tx.Rollback()
				started.Done()
				res, err := e.Store.Do(ctx, tx, "k", dbtest.HashA, e.Effect("k", dbtest.Created))
				switch {
				case err != nil:
					if !errors.Is(err, idem.ErrRetry) || !isDriverError(err) {
						t.Errorf("Do: %v, want an outcome or ErrRetry", err)
					}
					retried.Add(1)
				case res.Outcome == idem.Claimed:
					claimed.Add(1)
					if err := tx.Commit(); err != nil {
						t.Error(err)
					}
				case res.Outcome != idem.Replay:
					t.Errorf("outcome %v, want Claimed, Replay or ErrRetry", res.Outcome)
				}
			}()
		}
		started.Wait()
		// The holder rolls back 300 ms from now. A waiter whose claim
		// reaches the server only after that, on a loaded machine, waits
		// for the winner instead and Replays, which is accepted. Each
		// waits for the rollback, 300 ms plus what load adds, and then
		// at most for the winner's commit, milliseconds later: far
		// inside the 10 s lock timeout. Only a waiter that missed both
		// would answer InFlight, and fail, after those 10 s.
		after(t, 300*time.Millisecond, func() error { defer close(rollback); return holder.Rollback() })
		wg.Wait()
		<-rollback
		if claimed.Load() != 1 {
			t.Errorf("%d waiters claimed, want 1", claimed.Load())
		}
		t.Logf("deadlocks returned as ErrRetry: %d of %d waiters", retried.Load(), waiters)
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})
}

// testSQLiteBusy opens SQLite without the recommended DSN, so that a second
// writer fails at once with SQLITE_BUSY, and checks that it is ErrRetry.
func testSQLiteBusy(t *testing.T) {
	ctx := context.Background()
	e := setup(t, dbtest.SQLite("_pragma=busy_timeout(0)"))
	holder := e.Hold(t, "a", dbtest.HashA, dbtest.Created)
	tx := e.Begin(t, nil)
	if _, err := tx.ExecContext(ctx, "SELECT count(*) FROM "+e.Table); err != nil {
		t.Fatal(err)
	}
	_, err := e.Store.Do(ctx, tx, "b", dbtest.HashA, dbtest.MustNotRun(t))
	wantRetry(t, err)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	res, err := e.Store.DoTx(ctx, e.DB, nil, "b", dbtest.HashA, e.Effect("b", dbtest.Created))
	dbtest.WantOutcome(t, res, err, idem.Claimed)
}
