package idempgx

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/txn"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Func is the work that a key protects, as idem.Func, in a pgx transaction:
// it writes its effect in tx, and must neither commit nor roll tx back.
//
// In DoTx, which commits with a COMMIT that pgx's transaction does not see,
// tx and every savepoint set with its Begin, at any depth, refuse each call
// once DoTx has returned, with an error that matches pgx.ErrTxClosed and
// sql.ErrTxDone, rather than send it on a connection back in the pool.
// Their Conn and LargeObjects are pgx's and unguarded: use them only while
// the Func runs.
type Func func(ctx context.Context, tx pgx.Tx) (idem.Response, error)

// Do is idem.Store.Do in the caller's pgx transaction tx: it runs fn at
// most once for key, in tx, and answers what happened. On Claimed, commit
// tx to keep the effect and the record of the key together; on any other
// outcome or an error, Do wrote nothing. The claim and the completion are
// separate statements here; DoTx, which owns its transaction, saves round
// trips by sending them with BEGIN and COMMIT.
func Do(ctx context.Context, s *idem.Store, tx pgx.Tx, key string, reqHash []byte, fn Func) (idem.Result, error) {
	e, err := theEngine()
	if err != nil {
		return idem.Result{}, err
	}
	if tx == nil {
		return idem.Result{}, fmt.Errorf("%w: nil transaction", idem.ErrInvalidArgument)
	}
	var run func(context.Context) (idem.Response, error)
	if fn != nil {
		run = func(ctx context.Context) (idem.Response, error) { return fn(ctx, tx) }
	}
	return e.Do(ctx, s, callerTx{tx}, key, reqHash, run)
}

// DoTx is idem.Store.DoTx on a pgx pool: it begins a transaction on a
// connection of db with opts, runs fn in it for key at most once, commits
// when the outcome is Claimed and rolls back otherwise, and runs the whole
// transaction again on a conflict (idem.ErrRetry), as idem.Store.DoTx does,
// also when a commit's reply was lost. The connection goes back to db when
// DoTx returns.
//
// The claim goes in the round trip of the BEGIN, and the completion in the
// round trip of the COMMIT (see the package documentation). The read of the
// record that a claim finds goes with them when the Store never reads
// first (idem.LookupNever), so that a retry costs two round trips;
// otherwise a retry that comes to the transaction costs three, and retries
// that come often are answered by one read before it. pgx prepares each
// statement the first time a connection sends it, which costs that
// connection one more round trip once.
func DoTx(ctx context.Context, s *idem.Store, db *pgxpool.Pool, opts pgx.TxOptions, key string, reqHash []byte, fn Func) (idem.Result, error) {
	e, err := theEngine()
	if err != nil {
		return idem.Result{}, err
	}
	if db == nil {
		return idem.Result{}, fmt.Errorf("%w: nil pool", idem.ErrInvalidArgument)
	}
	var run func(context.Context, txn.Owned) (idem.Response, error)
	if fn != nil {
		run = func(ctx context.Context, tx txn.Owned) (idem.Response, error) {
			o := tx.(*ownedTx)
			if err := o.ready(); err != nil {
				return idem.Response{}, err
			}
			return fn(ctx, funcTx{Tx: o.tx, o: o})
		}
	}
	return e.DoTx(ctx, s, poolDB{pool: db, opts: opts}, key, reqHash, run)
}

// Lookup is idem.Store.Lookup on a pgx pool: the live record of key as a
// Result, or idem.ErrNotFound.
func Lookup(ctx context.Context, s *idem.Store, db *pgxpool.Pool, key string) (idem.Result, error) {
	e, err := theEngine()
	if err != nil {
		return idem.Result{}, err
	}
	if db == nil {
		return idem.Result{}, fmt.Errorf("%w: nil pool", idem.ErrInvalidArgument)
	}
	return e.Lookup(ctx, s, poolDB{pool: db}, key)
}

// Migrate is idem.Store.Migrate on a pgx pool: it creates the Store's table
// and index if they are missing and brings an older table up to date.
func Migrate(ctx context.Context, s *idem.Store, db *pgxpool.Pool) error {
	e, err := theEngine()
	if err != nil {
		return err
	}
	if db == nil {
		return fmt.Errorf("%w: nil pool", idem.ErrInvalidArgument)
	}
	return e.Migrate(ctx, s, poolDB{pool: db})
}

// Refusable is idem.Refusable for a pgx Func: when fn returns
// idem.Refuse(resp), its writes are undone, back to a savepoint set before
// it ran, and resp is stored as the key's response.
func Refusable(fn Func) Func {
	return func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
		if fn == nil {
			return idem.Response{}, fmt.Errorf("%w: nil Func", idem.ErrInvalidArgument)
		}
		e, err := theEngine()
		if err != nil {
			return idem.Response{}, err
		}
		sp, err := tx.Begin(ctx)
		if err != nil {
			return idem.Response{}, fmt.Errorf("idempgx: savepoint: %w", err)
		}
		resp, err := fn(ctx, sp)
		refused, ok := e.Refused(err)
		if !ok {
			if err == nil {
				err = sp.Commit(ctx)
			}
			return resp, err
		}
		if err := sp.Rollback(ctx); err != nil {
			return idem.Response{}, fmt.Errorf("idempgx: undo refused request: %w", err)
		}
		return refused, nil
	}
}

// engine is what package idem gives this package through txn.Engine.
type engine interface {
	Do(ctx context.Context, s *idem.Store, tx txn.Tx, key string, reqHash []byte, run func(context.Context) (idem.Response, error)) (idem.Result, error)
	DoTx(ctx context.Context, s *idem.Store, db txn.DB, key string, reqHash []byte, fn func(context.Context, txn.Owned) (idem.Response, error)) (idem.Result, error)
	Lookup(ctx context.Context, s *idem.Store, db txn.DB, key string) (idem.Result, error)
	Migrate(ctx context.Context, s *idem.Store, db txn.DB) error
	Refused(err error) (idem.Response, bool)
}

var errVersions = errors.New("idempgx: this version of idempgx does not fit the version of github.com/idemgo/idem in the build: require the same version of both")

func theEngine() (engine, error) {
	e, ok := txn.Engine.(engine)
	if !ok {
		return nil, errVersions
	}
	return e, nil
}
