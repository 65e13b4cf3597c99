package idem

import (
	"context"
	"database/sql"

	"github.com/idemgo/idem/driver"
)

// Runner runs the requests that an adapter protects on one database,
// through one driver: idemhttp's middleware and idemgrpc's interceptor
// turn a request into a key and a hash, and hand them to a Runner, which
// is the Store's DoTx and Run on that database, with the driver's
// transactions and their options. SQLRunner makes the Runner of a
// *sql.DB, and a driver's package makes its own with EngineRunner
// (idempgx.Runner, for a pgx pool), so that every adapter serves every
// driver, and a driver added later serves every adapter.
//
// The adapters never see the transaction: DoTx hands it to the handler in
// the context of serve, where WithTx puts it and TxFrom finds it, for the
// driver's type (idemhttp.Tx and idemgrpc.Tx for a *sql.Tx, idempgx.Tx
// for a pgx.Tx). A Runner is safe for concurrent use.
type Runner interface {
	// DoTx runs serve at most once for key, in a transaction of its own,
	// as Store.DoTx runs a Func. serve gets a context that carries the
	// transaction, for the handler to find it there; it returns the
	// response to store, or an error, on which nothing commits.
	DoTx(ctx context.Context, key string, reqHash []byte, serve func(ctx context.Context) (Response, error)) (Result, error)
	// Run runs steps for key as Store.Run runs them: their Phase and
	// Final steps take the driver's transaction.
	Run(ctx context.Context, key string, reqHash []byte, steps []Step) (Result, error)
}

// SQLRunner returns the Runner of s on db: Store.DoTx and Store.Run on db,
// in transactions begun with opts (nil: the database's defaults), of
// which it keeps a copy, so that a change to *opts afterwards changes
// nothing. The context of DoTx's serve carries each *sql.Tx, for
// TxFrom[*sql.Tx] (idemhttp.Tx, idemgrpc.Tx) to find.
//
// It returns nil for a nil db, so that an adapter given it refuses it at
// start-up, as it refuses a nil Runner. Its methods answer as the Store's
// do, ErrInvalidArgument for a nil Store or one not made by New included.
func SQLRunner(s *Store, db *sql.DB, opts *sql.TxOptions) Runner {
	if db == nil {
		return nil
	}
	r := sqlRunner{s: s, db: db}
	if opts != nil {
		o := *opts
		r.opts = &o
	}
	return r
}

// sqlRunner is the Runner of SQLRunner.
type sqlRunner struct {
	s    *Store
	db   *sql.DB
	opts *sql.TxOptions // SQLRunner's copy; nil: the database's defaults
}

func (r sqlRunner) DoTx(ctx context.Context, key string, reqHash []byte, serve func(context.Context) (Response, error)) (Result, error) {
	return r.s.DoTx(ctx, r.db, r.opts, key, reqHash, func(ctx context.Context, tx *sql.Tx) (Response, error) {
		return serve(WithTx(ctx, tx))
	})
}

func (r sqlRunner) Run(ctx context.Context, key string, reqHash []byte, steps []Step) (Result, error) {
	return r.s.Run(ctx, r.db, r.opts, key, reqHash, steps...)
}

// EngineRunner returns the Runner of e on db, for a driver's package to
// offer (idempgx.Runner does): Engine.DoTx and Engine.Run on db, whose
// transactions begin with the options that the driver's package gave it.
// The context of DoTx's serve carries each transaction, of the driver's
// type TX, for TxFrom[TX] to find.
//
// It returns nil for a nil db, so that an adapter given it refuses it at
// start-up, as it refuses a nil Runner.
func EngineRunner[TX any](e Engine[TX], db driver.DB[TX]) Runner {
	if db == nil {
		return nil
	}
	return engineRunner[TX]{e: e, db: db}
}

// engineRunner is the Runner of EngineRunner.
type engineRunner[TX any] struct {
	e  Engine[TX]
	db driver.DB[TX]
}

func (r engineRunner[TX]) DoTx(ctx context.Context, key string, reqHash []byte, serve func(context.Context) (Response, error)) (Result, error) {
	return r.e.DoTx(ctx, r.db, key, reqHash, func(ctx context.Context, tx TX) (Response, error) {
		return serve(WithTx(ctx, tx))
	})
}

func (r engineRunner[TX]) Run(ctx context.Context, key string, reqHash []byte, steps []Step) (Result, error) {
	return r.e.Run(ctx, r.db, key, reqHash, steps...)
}

// txKey is the context key of a transaction of type TX: one key per
// driver's type, so that a *sql.Tx and a pgx.Tx never stand for each
// other.
type txKey[TX any] struct{}

// WithTx returns a copy of ctx that carries tx, a transaction of the
// driver's type TX, for TxFrom[TX] to return. The Runners of SQLRunner and
// EngineRunner hand each of DoTx's transactions to the handler this way.
// It is exported so that a handler can be given a transaction without an
// adapter: a unit test of the handler alone calls it with a context from
// WithTx (idemhttp.WithTx and idempgx.WithTx are WithTx for their types).
// TX must be the type that TxFrom asks for, as the driver's Engine names
// it (*sql.Tx, pgx.Tx), not a type that implements it.
func WithTx[TX any](ctx context.Context, tx TX) context.Context {
	return context.WithValue(ctx, txKey[TX]{}, tx)
}

// TxFrom returns the transaction of type TX that WithTx put in ctx, and
// TX's zero value (nil for a pointer or an interface) when there is none:
// outside DoTx, or in a request that the adapter does not protect.
func TxFrom[TX any](ctx context.Context) TX {
	tx, _ := ctx.Value(txKey[TX]{}).(TX)
	return tx
}
