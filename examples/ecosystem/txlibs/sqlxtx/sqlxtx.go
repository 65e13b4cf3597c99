// Package sqlxtx shows idem's Store.Do inside a github.com/jmoiron/sqlx
// transaction. *sqlx.Tx embeds the *sql.Tx it wraps, so tx.Tx is what Do
// takes, and the effect written through sqlx's named statements is in the
// same transaction as the key.
package sqlxtx

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/idemgo/idem"
)

// Order is a row of the orders table.
type Order struct {
	ID   int64  `db:"id" json:"id"`
	Item string `db:"item" json:"item"`
}

// PlaceOrder inserts an order for item at most once per key, and answers
// with the order as JSON: a retry with the same key and item replays the
// first answer, and the same key with another item is a Mismatch.
//
// The order is inserted through tx, and Do claims the key in tx.Tx, the
// same transaction, so a commit keeps both and anything short of it keeps
// neither. The transaction commits only on Claimed: the other outcomes
// wrote nothing, and the deferred rollback ends them.
func PlaceOrder(ctx context.Context, db *sqlx.DB, store *idem.Store, key, item string) (idem.Result, error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return idem.Result{}, err
	}
	defer tx.Rollback() // a no-op after Commit

	hash := idem.Fingerprint([]byte("place order"), []byte(item))
	res, err := store.Do(ctx, tx.Tx, key, hash, func(ctx context.Context, _ *sql.Tx) (idem.Response, error) {
		// The *sql.Tx that Do passes is tx.Tx; writing through tx keeps
		// sqlx's named parameters and struct scanning.
		o := Order{Item: item}
		r, err := tx.NamedExecContext(ctx, `INSERT INTO orders (item) VALUES (:item)`, o)
		if err != nil {
			return idem.Response{}, err
		}
		if o.ID, err = r.LastInsertId(); err != nil {
			return idem.Response{}, err
		}
		body, err := json.Marshal(o)
		return idem.Response{Status: 201, Body: body}, err
	})
	if err != nil || res.Outcome != idem.Claimed {
		return res, err
	}
	if err := tx.Commit(); err != nil {
		// Do the call again with the same key: it replays if the
		// commit went through, and places the order if it did not.
		return idem.Result{}, fmt.Errorf("sqlxtx: commit: %w", err)
	}
	return res, nil
}
