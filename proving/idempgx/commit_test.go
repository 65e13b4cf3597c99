package idempgx_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestCompletionWithoutRowCommitsNothing removes the claim's record under
// DoTx: the Func deletes it, then writes its effect. The completion, sent
// with COMMIT, then changes no row, and the transaction must commit
// nothing: no effect, no record. DoTx runs the transaction again, as it
// does for a claim that is gone, until its attempts run out.
func TestCompletionWithoutRowCommitsNothing(t *testing.T) {
	e := setup(t, 2, idem.WithLookupFirst(idem.LookupNever))
	ctx := context.Background()
	runs := 0
	res, err := idempgx.New(e.Store).DoTx(ctx, e.pool, pgx.TxOptions{}, "k", hashA,
		func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
			runs++
			if _, err := tx.Exec(ctx, "DELETE FROM "+e.Table); err != nil {
				return idem.Response{}, err
			}
			return e.effect("k", created)(ctx, tx)
		})
	if !errors.Is(err, idem.ErrRetry) {
		t.Fatalf("DoTx = %v, %v; want an error that matches idem.ErrRetry", res.Outcome, err)
	}
	t.Logf("after %d runs: %v", runs, err)
	if n := e.EffectCount(t, "k"); n != 0 {
		t.Errorf("%d effects committed, want none", n)
	}
	if _, err := idempgx.New(e.Store).Lookup(ctx, e.pool, "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup = %v, want idem.ErrNotFound", err)
	}
	// The connections went back to the pool in a usable state.
	res, err = idempgx.New(e.Store).DoTx(ctx, e.pool, pgx.TxOptions{}, "k", hashA, e.effect("k", created))
	if err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("DoTx afterwards = %v, %v; want Claimed", res.Outcome, err)
	}
}

// errFunc is the error of a Func that ended its transaction and then
// failed.
var errFunc = errors.New("the Func failed after ending its transaction")

// TestFuncThatEndsTx commits or rolls back the transaction of Do or DoTx
// from the Func, which it must not do, and then answers, fails, or refuses
// through Refusable: Do and DoTx answer idem.ErrTxEnded, with the Func's own
// error where it returned one. A commit keeps the effect and an unfinished
// record, which answers InFlight; after a rollback, the key runs anew.
func TestFuncThatEndsTx(t *testing.T) {
	e := setup(t, 2, idem.WithLookupFirst(idem.LookupNever))
	ctx := context.Background()
	s := idempgx.New(e.Store)
	ends := []struct {
		name string
		f    func(pgx.Tx, context.Context) error
	}{
		{"commit", pgx.Tx.Commit},
		{"rollback", pgx.Tx.Rollback},
	}
	answers := []struct {
		name string
		fn   func(key string, end func(pgx.Tx, context.Context) error) idempgx.Func
		err  error // the Func's own error, to be found in Do's
	}{
		{"answers", func(key string, end func(pgx.Tx, context.Context) error) idempgx.Func {
			return func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
				if _, err := e.effect(key, created)(ctx, tx); err != nil {
					return idem.Response{}, err
				}
				return created, end(tx, ctx)
			}
		}, nil},
		{"fails", func(key string, end func(pgx.Tx, context.Context) error) idempgx.Func {
			return func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
				if _, err := e.effect(key, created)(ctx, tx); err != nil {
					return idem.Response{}, err
				}
				if err := end(tx, ctx); err != nil {
					return idem.Response{}, err
				}
				return idem.Response{}, errFunc
			}
		}, errFunc},
		{"refuses", func(key string, end func(pgx.Tx, context.Context) error) idempgx.Func {
			return func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
				return idempgx.Refusable(func(ctx context.Context, sp pgx.Tx) (idem.Response, error) {
					if _, err := e.effect(key, created)(ctx, sp); err != nil {
						return idem.Response{}, err
					}
					if err := end(tx, ctx); err != nil {
						return idem.Response{}, err
					}
					return idem.Response{}, idem.Refuse(idem.Response{Status: 402})
				})(ctx, tx)
			}
		}, nil},
	}
	calls := []struct {
		name string
		call func(key string, fn idempgx.Func) error
	}{
		{"Do", func(key string, fn idempgx.Func) error {
			tx, err := e.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			_, err = s.Do(ctx, tx, key, hashA, fn)
			return err
		}},
		{"DoTx", func(key string, fn idempgx.Func) error {
			_, err := s.DoTx(ctx, e.pool, pgx.TxOptions{}, key, hashA, fn)
			return err
		}},
	}
	for _, end := range ends {
		for _, a := range answers {
			for _, c := range calls {
				key := end.name + "/" + a.name + "/" + c.name
				err := c.call(key, a.fn(key, end.f))
				if !errors.Is(err, idem.ErrTxEnded) {
					t.Errorf("%s: %v, want an error that matches idem.ErrTxEnded", key, err)
				}
				if a.err != nil && !errors.Is(err, a.err) {
					t.Errorf("%s: %v, want the Func's own error too", key, err)
				}
				if end.name == "rollback" {
					if n := e.EffectCount(t, key); n != 0 {
						t.Errorf("%s: %d effect rows, want none", key, n)
					}
					res, err := s.DoTx(ctx, e.pool, pgx.TxOptions{}, key, hashA, e.effect(key, created))
					if err != nil || res.Outcome != idem.Claimed {
						t.Errorf("%s: DoTx afterwards = %v, %v; want Claimed", key, res.Outcome, err)
					}
					continue
				}
				if n := e.EffectCount(t, key); n != 1 {
					t.Errorf("%s: %d effect rows, want the 1 that the Func committed", key, n)
				}
				if res, err := s.Lookup(ctx, e.pool, key); err != nil || res.Outcome != idem.InFlight {
					t.Errorf("%s: Lookup = %v, %v; want InFlight", key, res.Outcome, err)
				}
			}
		}
	}
}

// TestTxRefusedAfterDoTx keeps the Func's transaction past DoTx, whose
// COMMIT pgx's transaction does not see: its statements must fail with
// pgx.ErrTxClosed rather than run on a connection back in the pool.
func TestTxRefusedAfterDoTx(t *testing.T) {
	e := setup(t, 1, idem.WithLookupFirst(idem.LookupNever))
	ctx := context.Background()
	var kept pgx.Tx
	res, err := idempgx.New(e.Store).DoTx(ctx, e.pool, pgx.TxOptions{}, "k", hashA,
		func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
			kept = tx
			return e.effect("k", created)(ctx, tx)
		})
	if err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("DoTx = %v, %v; want Claimed", res.Outcome, err)
	}
	if _, err := kept.Exec(ctx, e.Effects.InsertSQL(), dbtest.EffectKey("late"), "late"); !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("Exec after DoTx = %v, want pgx.ErrTxClosed", err)
	}
	var n int
	if err := kept.QueryRow(ctx, "SELECT 1").Scan(&n); !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("QueryRow after DoTx = %v, want pgx.ErrTxClosed", err)
	}
	if err := kept.Commit(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("Commit after DoTx = %v, want pgx.ErrTxClosed", err)
	}
	if n := e.EffectCount(t, "late"); n != 0 {
		t.Errorf("%d late effects, want none", n)
	}
}
