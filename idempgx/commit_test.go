package idempgx_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/internal/dbtest"
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

// TestFuncThatEndsTx commits or rolls back the transaction DoTx began, from
// the Func, which it must not do: DoTx answers idem.ErrTxEnded.
func TestFuncThatEndsTx(t *testing.T) {
	e := setup(t, 2, idem.WithLookupFirst(idem.LookupNever))
	ctx := context.Background()
	for _, end := range []struct {
		name string
		f    func(pgx.Tx, context.Context) error
	}{
		{"commit", pgx.Tx.Commit},
		{"rollback", pgx.Tx.Rollback},
	} {
		key := end.name
		_, err := idempgx.New(e.Store).DoTx(ctx, e.pool, pgx.TxOptions{}, key, hashA,
			func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
				if _, err := e.effect(key, created)(ctx, tx); err != nil {
					return idem.Response{}, err
				}
				return created, end.f(tx, ctx)
			})
		if !errors.Is(err, idem.ErrTxEnded) {
			t.Errorf("%s: DoTx = %v, want an error that matches idem.ErrTxEnded", end.name, err)
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
