package idempgx

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
)

// Runner returns the idem.Runner of store on db, a pgx pool, which every
// adapter takes: idemhttp.NewWithRunner (NewMiddleware is that) and
// idemgrpc.UnaryServerInterceptorWithRunner. Its DoTx and Run are the
// Store's on db, as New(store) runs them, in transactions begun with
// txOpts. A handler finds its transaction with Tx, over HTTP and gRPC
// alike, and the phases of a multi-step request get it as their pgx.Tx.
//
// It returns nil for a nil pool, so that an adapter given it refuses it at
// start-up, as it refuses a nil Runner.
func Runner(store *idem.Store, db *pgxpool.Pool, txOpts pgx.TxOptions) idem.Runner {
	return idem.EngineRunner(idem.EngineOf[pgx.Tx](store), pooled(db, txOpts)) // nil for a nil pool
}

// WithTx returns a copy of ctx that carries tx, for Tx to return: it is
// idem.WithTx for a pgx.Tx. The Runner hands each attempt's transaction to
// the handler this way; a unit test of a handler can do the same.
func WithTx(ctx context.Context, tx pgx.Tx) context.Context {
	return idem.WithTx(ctx, tx)
}

// Tx returns the transaction in which the handler of a protected request
// or call writes its effect, so that it commits with the record of the key
// or not at all; the adapter ends it, the handler must not. It is
// idem.TxFrom for a pgx.Tx: it finds the transaction of Runner's DoTx
// behind idemhttp's middleware and idemgrpc's interceptor alike. Tx
// returns nil for a request or call that the adapter does not protect.
func Tx(ctx context.Context) pgx.Tx {
	return idem.TxFrom[pgx.Tx](ctx)
}
