package idempgx

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// NewMiddleware returns idemhttp's middleware for a pgx pool: the requests
// it protects run through DoTx on db, and those of its Steps handlers
// through Run, in transactions begun with txOpts; handlers find their
// transaction with Tx, and phases get it as their pgx.Tx. The options are
// idemhttp's; see idemhttp.New for what they must choose.
func NewMiddleware(store *idem.Store, db *pgxpool.Pool, txOpts pgx.TxOptions, opts ...idemhttp.Option) (*idemhttp.Middleware, error) {
	if db == nil {
		return nil, fmt.Errorf("idempgx: %w: nil pool", idem.ErrInvalidArgument)
	}
	return idemhttp.NewWithRunner(store, runner{s: New(store), db: db, opts: txOpts}, opts...)
}

// runner is the idemhttp.Runner of NewMiddleware.
type runner struct {
	s    *Store
	db   *pgxpool.Pool
	opts pgx.TxOptions
}

func (r runner) DoTx(ctx context.Context, key string, reqHash []byte, serve func(context.Context) (idem.Response, error)) (idem.Result, error) {
	return r.s.DoTx(ctx, r.db, r.opts, key, reqHash, func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
		return serve(WithTx(ctx, tx))
	})
}

func (r runner) Run(ctx context.Context, key string, reqHash []byte, steps []idem.Step) (idem.Result, error) {
	return r.s.Run(ctx, r.db, r.opts, key, reqHash, steps...)
}

// txKey is the context key of a handler's transaction.
type txKey struct{}

// WithTx returns a copy of ctx that carries tx, for Tx to return. The
// middleware of NewMiddleware hands each attempt's transaction to the
// handler this way; a unit test of a handler can do the same.
func WithTx(ctx context.Context, tx pgx.Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// Tx returns the transaction in which the handler of a protected request
// writes its effect, so that it commits with the record of the key or not
// at all; the middleware ends it, the handler must not. Tx returns nil for
// a request the middleware does not protect.
func Tx(ctx context.Context) pgx.Tx {
	tx, _ := ctx.Value(txKey{}).(pgx.Tx)
	return tx
}
