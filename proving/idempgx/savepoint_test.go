package idempgx_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/dbtest"
)

// lateCall is one of pgx.Tx's methods, called on a transaction that a Func
// kept past DoTx's return; where it can write, it writes the effect row of
// key, which must then not exist.
type lateCall struct {
	name string
	call func(ctx context.Context, e *env, tx pgx.Tx, key string) error
}

// lateCalls are every method of pgx.Tx that sends something to the server.
var lateCalls = []lateCall{
	{"Exec", func(ctx context.Context, e *env, tx pgx.Tx, key string) error {
		_, err := tx.Exec(ctx, e.Effects.InsertSQL(), dbtest.EffectKey(key), "late")
		return err
	}},
	{"Query", func(ctx context.Context, e *env, tx pgx.Tx, key string) error {
		rows, err := tx.Query(ctx, e.Effects.InsertSQL()+" RETURNING k", dbtest.EffectKey(key), "late")
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}},
	{"QueryRow", func(ctx context.Context, e *env, tx pgx.Tx, key string) error {
		var k string
		return tx.QueryRow(ctx, e.Effects.InsertSQL()+" RETURNING k", dbtest.EffectKey(key), "late").Scan(&k)
	}},
	{"SendBatch", func(ctx context.Context, e *env, tx pgx.Tx, key string) error {
		b := &pgx.Batch{}
		b.Queue(e.Effects.InsertSQL(), dbtest.EffectKey(key), "late")
		results := tx.SendBatch(ctx, b)
		_, err := results.Exec()
		if cerr := results.Close(); err == nil {
			err = cerr
		}
		return err
	}},
	{"CopyFrom", func(ctx context.Context, e *env, tx pgx.Tx, key string) error {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{e.Effects.Table}, []string{"k", "note"},
			pgx.CopyFromRows([][]any{{dbtest.EffectKey(key), "late"}}))
		return err
	}},
	{"Prepare", func(ctx context.Context, e *env, tx pgx.Tx, key string) error {
		_, err := tx.Prepare(ctx, "late", e.Effects.InsertSQL())
		return err
	}},
	{"Begin", func(ctx context.Context, e *env, tx pgx.Tx, key string) error {
		_, err := tx.Begin(ctx)
		return err
	}},
	{"Commit", func(ctx context.Context, e *env, tx pgx.Tx, key string) error { return tx.Commit(ctx) }},
	{"Rollback", func(ctx context.Context, e *env, tx pgx.Tx, key string) error { return tx.Rollback(ctx) }},
}

// savepointDepth is how deep the savepoints go that a Func keeps: a
// savepoint of the Func's transaction, one of that savepoint, and so on.
const savepointDepth = 3

// keepSavepoints opens savepointDepth savepoints, each in the one before,
// the first in tx, and returns tx and them, outermost first.
func keepSavepoints(ctx context.Context, tx pgx.Tx) ([]pgx.Tx, error) {
	kept := []pgx.Tx{tx}
	for range savepointDepth {
		sp, err := kept[len(kept)-1].Begin(ctx)
		if err != nil {
			return nil, fmt.Errorf("savepoint %d: %w", len(kept), err)
		}
		kept = append(kept, sp)
	}
	return kept, nil
}

// TestSavepointsRefusedAfterDoTx keeps the Func's transaction and
// savepoints of it, at every depth up to savepointDepth, past DoTx's return,
// on each way DoTx can end: Claimed and committed, rolled back for the
// Func's error, and rolled back because the completion found no record.
// pgx's savepoints send their statements through pgx's transaction, which
// did not see DoTx's COMMIT: every call of every method on each of them must
// be refused with the guard's error (which, unlike pgx's own, also matches
// sql.ErrTxDone), and nothing may reach the server: no byte is written on
// any connection of the pool, and no late effect row exists.
func TestSavepointsRefusedAfterDoTx(t *testing.T) {
	e := setup(t, 1, idem.WithLookupFirst(idem.LookupNever))
	ctx := context.Background()
	errFunc := errors.New("the Func failed")
	for _, end := range []struct {
		name string
		// fn ends the Func's work, after the savepoints were opened.
		fn func(ctx context.Context, tx pgx.Tx, key string) (idem.Response, error)
		// ok tells whether DoTx ended as it should have.
		ok func(idem.Result, error) bool
	}{
		{"claimed",
			func(ctx context.Context, tx pgx.Tx, key string) (idem.Response, error) {
				return e.effect(key, created)(ctx, tx)
			},
			func(res idem.Result, err error) bool { return err == nil && res.Outcome == idem.Claimed }},
		{"func error",
			func(ctx context.Context, tx pgx.Tx, key string) (idem.Response, error) {
				return idem.Response{}, errFunc
			},
			func(_ idem.Result, err error) bool { return errors.Is(err, errFunc) }},
		{"claim gone",
			func(ctx context.Context, tx pgx.Tx, key string) (idem.Response, error) {
				if _, err := tx.Exec(ctx, "DELETE FROM "+e.Table); err != nil {
					return idem.Response{}, err
				}
				return e.effect(key, created)(ctx, tx)
			},
			func(_ idem.Result, err error) bool { return errors.Is(err, idem.ErrRetry) }},
	} {
		for _, c := range lateCalls {
			t.Run(end.name+"/"+c.name, func(t *testing.T) {
				key := end.name + "/" + c.name
				var kept []pgx.Tx // of every attempt that DoTx made
				res, err := idempgx.New(e.Store).DoTx(ctx, e.pool, pgx.TxOptions{}, key, hashA,
					func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
						txs, err := keepSavepoints(ctx, tx)
						if err != nil {
							return idem.Response{}, err
						}
						kept = append(kept, txs...)
						return end.fn(ctx, txs[len(txs)-1], key)
					})
				if !end.ok(res, err) {
					t.Fatalf("DoTx = %v, %v", res.Outcome, err)
				}
				for i, tx := range kept {
					depth := i % (savepointDepth + 1) // 0 is the Func's transaction
					lateKey := fmt.Sprintf("%s/late %d", key, i)
					var err error
					if trips := e.trips.count(func() { err = c.call(ctx, e, tx, lateKey) }); trips != 0 {
						t.Errorf("depth %d: %s after DoTx made %d round trips, want none", depth, c.name, trips)
					}
					if !errors.Is(err, pgx.ErrTxClosed) || !errors.Is(err, sql.ErrTxDone) {
						t.Errorf("depth %d: %s after DoTx = %v, want the guard's error, which matches pgx.ErrTxClosed and sql.ErrTxDone", depth, c.name, err)
					}
					if n := e.EffectCount(t, lateKey); n != 0 {
						t.Errorf("depth %d: %s after DoTx wrote %d late effects, want none", depth, c.name, n)
					}
				}
			})
		}
	}
}

// TestSavepointsWhileDoTxRuns uses savepoints of the Func's transaction, at
// several depths, while DoTx runs: they behave as pgx's own. Commit releases
// a savepoint, whose writes an enclosing savepoint's Rollback still undoes;
// Rollback goes back to the savepoint, and the transaction goes on.
func TestSavepointsWhileDoTxRuns(t *testing.T) {
	e := setup(t, 1, idem.WithLookupFirst(idem.LookupNever))
	ctx := context.Background()
	write := func(ctx context.Context, tx pgx.Tx, key string) error {
		_, err := e.effect(key, created)(ctx, tx)
		return err
	}
	res, err := idempgx.New(e.Store).DoTx(ctx, e.pool, pgx.TxOptions{}, "k", hashA,
		func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
			// Each savepoint begins after a write in the one it is in;
			// savepoints mark a point in time, and a rollback undoes
			// whatever came after its point, through any of them.
			sp := []pgx.Tx{tx}
			for i := range savepointDepth + 1 {
				if err := write(ctx, sp[i], fmt.Sprintf("kept %d", i)); err != nil {
					return idem.Response{}, err
				}
				if i == savepointDepth {
					break
				}
				next, err := sp[i].Begin(ctx)
				if err != nil {
					return idem.Response{}, err
				}
				sp = append(sp, next)
			}
			// The deepest savepoint, rolled back: its write is undone, and
			// it refuses further statements, as pgx's does.
			if err := sp[3].Rollback(ctx); err != nil {
				return idem.Response{}, fmt.Errorf("rollback of the deepest savepoint: %w", err)
			}
			if err := write(ctx, sp[3], "after rollback"); !errors.Is(err, pgx.ErrTxClosed) {
				return idem.Response{}, fmt.Errorf("a write on a savepoint rolled back = %v, want pgx.ErrTxClosed", err)
			}
			// A savepoint in the one of depth 2, released, then the one of
			// depth 2 rolled back: the released savepoint's write is undone
			// with it.
			inner, err := sp[2].Begin(ctx)
			if err != nil {
				return idem.Response{}, err
			}
			if err := write(ctx, inner, "released then undone"); err != nil {
				return idem.Response{}, err
			}
			if err := inner.Commit(ctx); err != nil {
				return idem.Response{}, fmt.Errorf("release: %w", err)
			}
			if err := sp[2].Rollback(ctx); err != nil {
				return idem.Response{}, err
			}
			// The savepoint of depth 1, released: its writes stay.
			if err := sp[1].Commit(ctx); err != nil {
				return idem.Response{}, err
			}
			if err := write(ctx, tx, "after"); err != nil {
				return idem.Response{}, err
			}
			return created, nil
		})
	if err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("DoTx = %v, %v; want Claimed", res.Outcome, err)
	}
	for key, want := range map[string]int{
		"kept 0": 1, "kept 1": 1, "kept 2": 0, "kept 3": 0,
		"after rollback": 0, "released then undone": 0, "after": 1,
	} {
		if n := e.EffectCount(t, key); n != want {
			t.Errorf("%d effects for %q, want %d", n, key, want)
		}
	}
}

// TestRefusableInDoTx runs idempgx.Refusable, which sets a savepoint, in
// DoTx's transaction: a refused request's writes are undone and its
// response is stored; one that is not refused keeps its writes.
func TestRefusableInDoTx(t *testing.T) {
	e := setup(t, 1, idem.WithLookupFirst(idem.LookupNever))
	ctx := context.Background()
	declined := idem.Response{Status: http.StatusPaymentRequired, Body: []byte(`{"error":"declined"}`)}
	res, err := idempgx.New(e.Store).DoTx(ctx, e.pool, pgx.TxOptions{}, "refused", hashA,
		idempgx.Refusable(func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
			if _, err := e.effect("refused", created)(ctx, tx); err != nil {
				return idem.Response{}, err
			}
			return idem.Response{}, idem.Refuse(declined)
		}))
	if err != nil || res.Outcome != idem.Claimed || res.Response.Status != declined.Status {
		t.Fatalf("DoTx = %v, %d, %v; want Claimed with %d", res.Outcome, res.Response.Status, err, declined.Status)
	}
	if n := e.EffectCount(t, "refused"); n != 0 {
		t.Errorf("%d effects of a refused request, want none", n)
	}
	res, err = idempgx.New(e.Store).Lookup(ctx, e.pool, "refused")
	if err != nil || res.Response.Status != declined.Status || string(res.Response.Body) != string(declined.Body) {
		t.Errorf("Lookup = %d %q, %v; want the refusal stored", res.Response.Status, res.Response.Body, err)
	}

	res, err = idempgx.New(e.Store).DoTx(ctx, e.pool, pgx.TxOptions{}, "done", hashA, idempgx.Refusable(e.effect("done", created)))
	if err != nil || res.Outcome != idem.Claimed || res.Response.Status != created.Status {
		t.Fatalf("DoTx = %v, %d, %v; want Claimed with %d", res.Outcome, res.Response.Status, err, created.Status)
	}
	if n := e.EffectCount(t, "done"); n != 1 {
		t.Errorf("%d effects of a request not refused, want 1", n)
	}
}
