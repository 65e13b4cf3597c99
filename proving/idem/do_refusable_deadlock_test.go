package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestRefusableAfterDeadlock makes a real deadlock between two requests
// whose Funcs are wrapped in Refusable: each writes its effect, locks one of
// two rows, waits until the other holds the other row, and then asks for
// it. The MySQL family rolls back the whole transaction of the victim, its
// savepoint with it, and database/sql goes on in autocommit. Whatever the
// victim's Func does then, return the deadlock, refuse, or answer as if
// nothing had happened, its Do must answer an error that matches ErrRetry
// (not the error of the savepoint that is gone), so that DoTx runs it again
// and the second attempt stores its answer; the survivor's request is
// unaffected. Each key ends with its one answer, and one effect unless its
// Func refused.
//
// PostgreSQL keeps the victim's transaction, aborted: a refusal rolls back
// to the savepoint and is stored at the first attempt, as before, and a
// returned deadlock is ErrRetry. (A Func that carries on after the error
// gets the error of the aborted transaction, 25P02, there: return errors.)
func TestRefusableAfterDeadlock(t *testing.T) {
	declined := idem.Response{Status: 402, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"error":"declined"}`)}
	created := idem.Response{Status: 201, Body: []byte(`{"order":1}`)}
	hash := idem.Fingerprint([]byte("POST /payments"))
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		afters := []string{"returns the deadlock", "refuses", "answers"}
		switch tg.Family {
		case "postgres":
			afters = afters[:2]
		case "sqlite":
			t.Skip("SQLite runs one writer at a time and has no deadlock")
		}
		for _, after := range afters {
			for _, via := range []string{"Do", "DoTx"} {
				t.Run(after+"/"+via, func(t *testing.T) {
					e := setup(t, tg)
					ctx := context.Background()
					rows := dbtest.NewTable(t, e.DB, "rows_")
					create := "CREATE TABLE " + rows + " (id INT NOT NULL PRIMARY KEY, n INT NOT NULL)"
					if tg.Family == "mysql" {
						create += " ENGINE=InnoDB"
					}
					for _, q := range []string{create, "INSERT INTO " + rows + " (id, n) VALUES (1, 0), (2, 0)"} {
						if _, err := e.DB.ExecContext(ctx, q); err != nil {
							t.Fatal(err)
						}
					}
					// Only the MySQL family ends the victim's transaction, so
					// only there a refusal after the deadlock runs again.
					serverEnds := tg.Family == "mysql"
					want := created
					if after == "refuses" {
						want = declined
					}
					a := &deadlockParty{key: "a", first: 1, second: 2, holds: make(chan struct{}), done: make(chan struct{})}
					b := &deadlockParty{key: "b", first: 2, second: 1, holds: make(chan struct{}), done: make(chan struct{})}
					a.other, b.other = b.holds, a.holds
					a.otherDone, b.otherDone = b.done, a.done
					fn := func(p *deadlockParty) idem.Func {
						return idem.Refusable(func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
							if err := e.Effects.Insert(ctx, tx, p.key, "done"); err != nil {
								return idem.Response{}, err
							}
							lock := func(id int) error {
								_, err := tx.ExecContext(ctx, "UPDATE "+rows+" SET n = n + 1 WHERE id = "+tg.Dialect.Placeholder(1), id)
								return err
							}
							if p.attempts.Load() > 0 {
								// The victim's next attempt locks after
								// the other request has finished: on a
								// busy machine it could otherwise take
								// a row first and deadlock anew.
								select {
								case <-p.otherDone:
								case <-ctx.Done():
									return idem.Response{}, ctx.Err()
								}
							}
							err := lock(p.first)
							if p.attempts.Add(1) == 1 {
								close(p.holds) // whatever happened, so that the other never waits in vain
								<-p.other
							}
							if err == nil {
								err = lock(p.second)
							}
							if err != nil {
								if kind := failureKind(err); kind != "deadlock 1213" && kind != "deadlock 40P01" {
									return idem.Response{}, fmt.Errorf("not the deadlock: %w", err)
								}
								p.deadlocked.Store(true)
								switch after {
								case "returns the deadlock":
									return idem.Response{}, err
								case "refuses":
									return idem.Response{}, idem.Refuse(declined)
								}
								return created, nil
							}
							if after == "refuses" {
								return idem.Response{}, idem.Refuse(declined)
							}
							return created, nil
						})
					}
					call := func(p *deadlockParty) (idem.Result, error) {
						if via == "DoTx" {
							return e.Store.DoTx(ctx, e.DB, nil, p.key, hash, fn(p))
						}
						tx, err := e.DB.BeginTx(ctx, nil)
						if err != nil {
							return idem.Result{}, err
						}
						res, err := e.Store.Do(ctx, tx, p.key, hash, fn(p))
						if err != nil {
							_ = tx.Rollback()
							return res, err
						}
						return res, tx.Commit()
					}
					results := make([]idem.Result, 2)
					errs := startTogether(2, func(i int) (err error) {
						p := []*deadlockParty{a, b}[i]
						defer close(p.done)
						results[i], err = call(p)
						return err
					})
					if a.deadlocked.Load() == b.deadlocked.Load() {
						t.Fatalf("deadlock victims: a %v, b %v; want exactly one", a.deadlocked.Load(), b.deadlocked.Load())
					}
					for i, p := range []*deadlockParty{a, b} {
						res, err := results[i], errs[i]
						retried := p.deadlocked.Load() && (serverEnds || after == "returns the deadlock")
						if retried && via == "Do" {
							if !errors.Is(err, idem.ErrRetry) {
								t.Fatalf("%s, the victim: Do = %v, want an error that matches ErrRetry", p.key, err)
							}
							res, err = call(p) // the caller runs the transaction again
						}
						if err != nil || res.Outcome != idem.Claimed {
							t.Fatalf("%s: %v %v, want %v", p.key, err, res.Outcome, idem.Claimed)
						}
						dbtest.SameResponse(t, res.Response, want)
						wantAttempts := int32(1)
						if retried {
							wantAttempts = 2
						}
						if got := p.attempts.Load(); got != wantAttempts {
							t.Errorf("%s: the Func ran %d times, want %d", p.key, got, wantAttempts)
						}
						res, err = e.Store.Lookup(ctx, e.DB, p.key)
						if err != nil || res.Outcome != idem.Replay {
							t.Fatalf("Lookup %s: %v %v, want %v", p.key, err, res.Outcome, idem.Replay)
						}
						dbtest.SameResponse(t, res.Response, want)
						wantEffects := 1
						if after == "refuses" {
							wantEffects = 0
						}
						if got := e.EffectCount(t, p.key); got != wantEffects {
							t.Errorf("%s: %d effect rows, want %d", p.key, got, wantEffects)
						}
					}
				})
			}
		}
	})
}

// deadlockParty is one of the two requests of TestRefusableAfterDeadlock:
// it locks row first, closes holds, waits for other, and locks row second.
type deadlockParty struct {
	key           string
	first, second int
	holds, other  chan struct{}
	// done is closed when the party's first call returned, and otherDone
	// is the other party's.
	done, otherDone chan struct{}
	attempts        atomic.Int32
	deadlocked      atomic.Bool
}
