package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// commitsItself is a Func that makes the mistake of committing tx itself,
// after writing its effect.
func (e *env) commitsItself(key string) idem.Func {
	return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if _, err := e.Effect(key, dbtest.Created)(ctx, tx); err != nil {
			return idem.Response{}, err
		}
		return dbtest.Created, tx.Commit()
	}
}

// errFunc is the error of a Func that ended its transaction and then
// failed.
var errFunc = errors.New("the Func failed after ending its transaction")

// TestFuncEndsTransaction shows what Do and DoTx answer when fn commits or
// rolls back the transaction itself, and then answers, fails, or refuses
// through Refusable: an error that matches ErrTxEnded and sql.ErrTxDone,
// and fn's own error where it returned one, never Claimed. A commit keeps
// the effect and an unfinished record, which answers InFlight until an
// operator settles it (TestSettle); after a rollback, the key runs anew.
func TestFuncEndsTransaction(t *testing.T) {
	f := func(t *testing.T, tg target) {
		e := setup(t, tg)
		ctx := context.Background()
		ends := []struct {
			name string
			end  func(*sql.Tx) error
		}{
			{"commit", (*sql.Tx).Commit},
			{"rollback", (*sql.Tx).Rollback},
		}
		answers := []struct {
			name string
			fn   func(key string, end func(*sql.Tx) error) idem.Func
			err  error // fn's own error, to be found in Do's
		}{
			{"answers", func(key string, end func(*sql.Tx) error) idem.Func {
				return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
					if _, err := e.Effect(key, dbtest.Created)(ctx, tx); err != nil {
						return idem.Response{}, err
					}
					return dbtest.Created, end(tx)
				}
			}, nil},
			{"fails", func(key string, end func(*sql.Tx) error) idem.Func {
				return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
					if _, err := e.Effect(key, dbtest.Created)(ctx, tx); err != nil {
						return idem.Response{}, err
					}
					if err := end(tx); err != nil {
						return idem.Response{}, err
					}
					return idem.Response{}, errFunc
				}
			}, errFunc},
			{"refuses", func(key string, end func(*sql.Tx) error) idem.Func {
				return idem.Refusable(func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
					if _, err := e.Effect(key, dbtest.Created)(ctx, tx); err != nil {
						return idem.Response{}, err
					}
					if err := end(tx); err != nil {
						return idem.Response{}, err
					}
					return idem.Response{}, idem.Refuse(idem.Response{Status: 402})
				})
			}, nil},
		}
		calls := []struct {
			name string
			call func(key string, fn idem.Func) error
		}{
			{"Do", func(key string, fn idem.Func) error {
				_, err := e.Store.Do(ctx, e.Begin(t, nil), key, dbtest.HashA, fn)
				return err
			}},
			{"DoTx", func(key string, fn idem.Func) error {
				_, err := e.Store.DoTx(ctx, e.DB, nil, key, dbtest.HashA, fn)
				return err
			}},
		}
		for _, end := range ends {
			for _, a := range answers {
				for _, c := range calls {
					key := end.name + "/" + a.name + "/" + c.name
					err := c.call(key, a.fn(key, end.end))
					if !errors.Is(err, idem.ErrTxEnded) || !errors.Is(err, sql.ErrTxDone) {
						t.Errorf("%s: %v, want ErrTxEnded", key, err)
					}
					if a.err != nil && !errors.Is(err, a.err) {
						t.Errorf("%s: %v, want the Func's own error too", key, err)
					}
					if end.name == "rollback" {
						if n := e.EffectCount(t, key); n != 0 {
							t.Errorf("%s: %d effect rows, want none", key, n)
						}
						res, err := e.Store.DoTx(ctx, e.DB, nil, key, dbtest.HashA, e.Effect(key, dbtest.Created))
						dbtest.WantOutcome(t, res, err, idem.Claimed)
						continue
					}
					if n := e.EffectCount(t, key); n != 1 {
						t.Errorf("%s: %d effect rows, want the 1 that fn committed", key, n)
					}
					res, err := e.Store.Lookup(ctx, e.DB, key)
					dbtest.WantOutcome(t, res, err, idem.InFlight)
				}
			}
		}
	}
	dbtest.ForEachTarget(t, f)
	dbtest.ForEachVitess(t, f)
}

// TestSettle settles and releases keys left unfinished by a Func that
// committed, and shows what both refuse.
func TestSettle(t *testing.T) {
	f := func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithLockTimeout(100*time.Millisecond))
		ctx := context.Background()
		stuck := func(key string) {
			t.Helper()
			if _, err := e.Store.DoTx(ctx, e.DB, nil, key, dbtest.HashA, e.commitsItself(key)); !errors.Is(err, idem.ErrTxEnded) {
				t.Fatalf("DoTx = %v, want ErrTxEnded", err)
			}
		}

		stuck("settled")
		settled := idem.Response{Status: 201, Header: dbtest.Created.Header, Body: []byte(`{"order":1,"settled":true}`)}
		if err := e.Store.Settle(ctx, e.DB, "settled", settled); err != nil {
			t.Fatalf("Settle: %v", err)
		}
		res, err := e.Store.DoTx(ctx, e.DB, nil, "settled", dbtest.HashA, dbtest.MustNotRun(t))
		dbtest.WantOutcome(t, res, err, idem.Replay)
		dbtest.SameResponse(t, res.Response, settled)
		res, err = e.Store.DoTx(ctx, e.DB, nil, "settled", dbtest.HashB, dbtest.MustNotRun(t))
		dbtest.WantOutcome(t, res, err, idem.Mismatch)
		if err := e.Store.Settle(ctx, e.DB, "settled", settled); !errors.Is(err, idem.ErrKeyFinished) {
			t.Errorf("Settle of a finished key = %v, want ErrKeyFinished", err)
		}
		if err := e.Store.ReleaseWithoutEffect(ctx, e.DB, "settled"); !errors.Is(err, idem.ErrKeyFinished) {
			t.Errorf("ReleaseWithoutEffect of a finished key = %v, want ErrKeyFinished", err)
		}

		stuck("released")
		if err := e.Store.ReleaseWithoutEffect(ctx, e.DB, "released"); err != nil {
			t.Fatalf("ReleaseWithoutEffect: %v", err)
		}
		if _, err := e.Store.Lookup(ctx, e.DB, "released"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup after the release = %v, want ErrNotFound", err)
		}
		res, err = e.Store.DoTx(ctx, e.DB, nil, "released", dbtest.HashA, e.Effect("released", dbtest.Created))
		dbtest.WantOutcome(t, res, err, idem.Claimed)

		if err := e.Store.Settle(ctx, e.DB, "never", settled); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Settle of a missing key = %v, want ErrNotFound", err)
		}
		if _, err := e.Store.Lookup(ctx, e.DB, "never"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Settle of a missing key left a record: %v", err)
		}

		if dialect.CapabilitiesOf(tg.Dialect).OneWriter {
			return // one writer at a time: Settle would wait at BEGIN for the holder
		}
		tx := e.Begin(t, nil)
		res, err = e.Store.Do(ctx, tx, "held", dbtest.HashA, e.Effect("held", dbtest.Created))
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		for _, op := range []func() error{
			func() error { return e.Store.Settle(ctx, e.DB, "held", settled) },
			func() error { return e.Store.ReleaseWithoutEffect(ctx, e.DB, "held") },
		} {
			if err := op(); !errors.Is(err, idem.ErrKeyHeld) {
				t.Errorf("settling a key that a live transaction holds = %v, want ErrKeyHeld", err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		res, err = e.Store.Lookup(ctx, e.DB, "held")
		dbtest.WantOutcome(t, res, err, idem.Replay)
		dbtest.SameResponse(t, res.Response, dbtest.Created)
	}
	dbtest.ForEachTarget(t, f)
	dbtest.ForEachVitess(t, f)
}
