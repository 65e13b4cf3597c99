// Package shop is what the router examples share: the idemhttp middleware
// as they configure it, and the effect their handlers write.
package shop

import (
	"context"
	"database/sql"
	"errors"
	"net/http"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// AccountHeader names the client in the examples. A real service takes the
// account from its authentication, in front of the middleware.
const AccountHeader = "X-Account"

// Protect returns the idemhttp middleware the routers mount: keys are
// required, and scoped by account so that two clients never share one. A
// service makes it once, at start-up, where its error (a configuration
// mistake) can stop the start, and hands it to the router.
func Protect(store *idem.Store, db *sql.DB) (*idemhttp.Middleware, error) {
	return idemhttp.New(store, db, nil,
		idemhttp.WithKeyRequired(),
		idemhttp.WithScope(func(r *http.Request) (string, error) {
			if a := r.Header.Get(AccountHeader); a != "" {
				return a, nil
			}
			return "", errors.New("shop: no account")
		}),
	)
}

// Order is a row of the orders table, and the body of a created order.
type Order struct {
	ID   int64  `json:"id"`
	Item string `json:"item"`
}

// CreateOrder inserts an order for item in tx, the transaction of the
// protected request.
func CreateOrder(ctx context.Context, tx *sql.Tx, item string) (Order, error) {
	if tx == nil {
		// Only a request the middleware does not protect has no
		// transaction; with Required, none reaches the handler.
		return Order{}, errors.New("shop: no transaction: is the route protected?")
	}
	r, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES (?)`, item)
	if err != nil {
		return Order{}, err
	}
	id, err := r.LastInsertId()
	return Order{ID: id, Item: item}, err
}
