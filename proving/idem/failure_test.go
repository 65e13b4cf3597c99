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
	"github.com/idemgo/idem/proving/fault"
)

// killSession ends the database session of tx from another connection, as
// an administrator or a failover would.
func (e *env) killSession(t *testing.T, tx *sql.Tx) {
	t.Helper()
	ctx := context.Background()
	var id int64
	switch e.tg.Family {
	case "postgres":
		if err := tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := e.DB.ExecContext(ctx, "SELECT pg_terminate_backend($1)", id); err != nil {
			t.Fatal(err)
		}
	case "mysql":
		if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := e.DB.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDroppedConnection ends the claiming transaction's session on the
// server, inside fn and before the commit: the call or the commit fails,
// nothing is half-written, and the retry succeeds.
func TestDroppedConnection(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		if tg.Family == "sqlite" {
			t.Skip("SQLite has no server session to end")
		}
		ctx := context.Background()
		for _, inFn := range []bool{true, false} {
			name := "before the commit"
			if inFn {
				name = "inside fn"
			}
			t.Run(name, func(t *testing.T) {
				// The server ends the killed session's transaction, and
				// frees its claim, on its own time: the DoTx below may
				// start while it is still at it, and then waits for the
				// claim. That takes milliseconds, even on a loaded
				// machine; a claim the server never freed would hold the
				// key for good, and DoTx would answer InFlight after the
				// lock timeout. 10 s, rather than the default second,
				// leaves the server all the room a busy machine needs.
				e := setup(t, tg, idem.WithLockTimeout(10*time.Second))
				tx := e.Begin(t, nil)
				_, err := e.Store.Do(ctx, tx, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
					if inFn {
						e.killSession(t, tx)
					}
					return e.Effect("k", dbtest.Created)(ctx, tx)
				})
				if !inFn {
					if err != nil {
						t.Fatal(err)
					}
					e.killSession(t, tx)
					err = tx.Commit()
				}
				if err == nil {
					t.Fatal("the call and the commit succeeded on a dropped connection")
				}
				_ = tx.Rollback()
				if _, err := e.Store.Lookup(ctx, e.DB, "k"); !errors.Is(err, idem.ErrNotFound) {
					t.Errorf("Lookup: %v, want ErrNotFound: nothing half-written", err)
				}
				if n := e.EffectCount(t, "k"); n != 0 {
					t.Errorf("%d effect rows left behind", n)
				}
				res, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, e.Effect("k", dbtest.Created))
				dbtest.WantOutcome(t, res, err, idem.Claimed)
				if n := e.EffectCount(t, "k"); n != 1 {
					t.Errorf("%d effect rows, want 1", n)
				}
			})
		}
	})
}

// proxied opens e's database through a fault.Proxy of its own, closed at the
// end of t.
func (e *env) proxied(t *testing.T) (*fault.Proxy, *sql.DB) {
	t.Helper()
	var p *fault.Proxy
	dsn := fault.DSNThrough(t, e.tg.Family, e.DSN, func(target string) string {
		p = fault.StartProxy(t, target)
		return p.Addr()
	})
	db, err := sql.Open(e.tg.Driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return p, db
}

// TestLostCommitReplyOverTCP puts a TCP proxy between DoTx and the server
// that cuts the connection at the COMMIT, after or before passing it on. DoTx
// must find out from the database what happened, and leave one effect.
func TestLostCommitReplyOverTCP(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		if tg.Family == "sqlite" {
			t.Skip("SQLite has no network between the client and the database")
		}
		for _, c := range []struct {
			name string
			mode fault.Cut
			runs int // times fn must run
		}{
			{"the server committed", fault.CutAfterCommit, 1},
			{"the commit never arrived", fault.CutBeforeCommit, 2},
			// The commit lands after DoTx looked the key up and found
			// nothing: the next attempt's claim waits for the first
			// one's session, then finds its record, which is this
			// request's own, and answers Claimed, not Replay, without
			// running fn again.
			{"the commit landed after the lookup", fault.CutLateCommit, 1},
		} {
			t.Run(c.name, func(t *testing.T) {
				// When the proxy cuts the connection before the COMMIT,
				// the server rolls the session back once it sees the
				// connection closed, and DoTx's second attempt may wait
				// for that session's claim meanwhile: milliseconds, even
				// on a loaded machine, while a claim the server never
				// freed would make DoTx answer InFlight after the lock
				// timeout. 10 s, rather than the default second, leaves
				// the server all the room a busy machine needs.
				e := setup(t, tg, idem.WithLockTimeout(10*time.Second))
				p, db := e.proxied(t)
				runs := 0
				res, err := e.Store.DoTx(context.Background(), db, nil, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
					runs++
					if runs == 1 {
						p.SetCut(c.mode)
					}
					return e.Effect("k", dbtest.Created)(ctx, tx)
				})
				dbtest.WantOutcome(t, res, err, idem.Claimed)
				dbtest.SameResponse(t, res.Response, dbtest.Created)
				if runs != c.runs {
					t.Errorf("fn ran %d times, want %d", runs, c.runs)
				}
				if p.Pending() != fault.CutNothing {
					t.Error("the proxy never saw the COMMIT")
				}
				if n := e.EffectCount(t, "k"); n != 1 {
					t.Errorf("%d effect rows, want 1", n)
				}
			})
		}
	})
}

// TestPostgresLockTimeoutUntouched shows that the claim sets no lock timeout
// that could leak into the rest of the caller's transaction or into the
// pooled session, whatever the outcome.
func TestPostgresLockTimeoutUntouched(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		if tg.Family != "postgres" {
			t.Skip("PostgreSQL only")
		}
		// The claim of "held" waits the 100 ms lock timeout for a holder
		// that ends only after the loop, and answers InFlight however
		// long load makes that wait; the other claims wait for nothing.
		e := setup(t, tg, idem.WithLockTimeout(100*time.Millisecond))
		e.DB.SetMaxOpenConns(2)
		ctx := context.Background()
		show := func(q interface {
			QueryRowContext(context.Context, string, ...any) *sql.Row
		}) string {
			var v string
			if err := q.QueryRowContext(ctx, "SHOW lock_timeout").Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		holder := e.Hold(t, "held", dbtest.HashA, dbtest.Created)
		for _, c := range []struct {
			key  string
			want idem.Outcome
		}{{"k", idem.Claimed}, {"k", idem.Replay}, {"held", idem.InFlight}} {
			tx := e.Begin(t, nil)
			if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = '7s'"); err != nil {
				t.Fatal(err)
			}
			res, err := e.Store.Do(ctx, tx, c.key, dbtest.HashA, e.Effect(c.key, dbtest.Created))
			dbtest.WantOutcome(t, res, err, c.want)
			if got := show(tx); got != "7s" {
				t.Errorf("%v: lock_timeout in the caller's transaction is %q, want the caller's 7s", c.want, got)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := show(e.DB); got != "0" {
				t.Errorf("%v: lock_timeout of the pooled session is %q, want 0", c.want, got)
			}
		}
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSQLiteWithoutRecommendedDSN opens SQLite without _txlock=immediate and
// with a short busy timeout, the way many services do: concurrent writers
// get ErrRetry, DoTx gets them through, and no outcome is ever wrong. The
// 20 ms busy timeout bounds nothing the test checks: on a loaded machine
// more attempts run out of it, and a call whose attempts all do is counted,
// not failed.
func TestSQLiteWithoutRecommendedDSN(t *testing.T) {
	for _, params := range []string{"_pragma=busy_timeout(20)", "_pragma=busy_timeout(20)&_pragma=journal_mode(WAL)"} {
		t.Run(params, func(t *testing.T) {
			e := setup(t, dbtest.SQLite(params))
			ctx := context.Background()
			const workers, keys = 16, 8
			var (
				wg                 sync.WaitGroup
				claimed, exhausted atomic.Int32
			)
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := 0; k < keys; k++ {
						key := fmt.Sprintf("key-%d", (k+w)%keys)
						fn := func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
							// Read first, as handlers do: the write that
							// follows is where SQLite refuses.
							var n int
							if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+e.Effects.Table).Scan(&n); err != nil {
								return idem.Response{}, err
							}
							return e.Effect(key, dbtest.Created)(ctx, tx)
						}
						res, err := e.Store.DoTx(ctx, e.DB, nil, key, dbtest.HashA, fn)
						switch {
						case errors.Is(err, idem.ErrRetry):
							exhausted.Add(1)
						case err != nil:
							t.Errorf("DoTx(%s): %v, want an outcome or ErrRetry", key, err)
						case res.Outcome == idem.Claimed:
							claimed.Add(1)
						case res.Outcome != idem.Replay:
							t.Errorf("DoTx(%s) = %v", key, res.Outcome)
						}
					}
				}()
			}
			wg.Wait()
			for k := 0; k < keys; k++ {
				if n := e.EffectCount(t, fmt.Sprintf("key-%d", k)); n > 1 {
					t.Errorf("key-%d: %d effect rows", k, n)
				}
			}
			if claimed.Load() > keys {
				t.Errorf("%d claims for %d keys", claimed.Load(), keys)
			}
			t.Logf("%d calls: %d claimed, %d still busy after DoTx's attempts", workers*keys, claimed.Load(), exhausted.Load())
		})
	}
}
