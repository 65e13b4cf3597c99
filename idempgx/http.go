package idempgx

import (
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
// idemhttp's; see idemhttp.New for what they must choose. It is
// idemhttp.NewWithRunner with Runner(store, db, txOpts).
func NewMiddleware(store *idem.Store, db *pgxpool.Pool, txOpts pgx.TxOptions, opts ...idemhttp.Option) (*idemhttp.Middleware, error) {
	if db == nil {
		return nil, fmt.Errorf("idempgx: %w: nil pool", idem.ErrInvalidArgument)
	}
	return idemhttp.NewWithRunner(store, Runner(store, db, txOpts), opts...)
}
