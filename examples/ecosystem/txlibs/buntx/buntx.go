// Package buntx shows idem's Store.Do inside a github.com/uptrace/bun
// transaction. bun.Tx embeds the *sql.Tx it runs on, so tx.Tx is what Do
// takes, and the model that bun inserts is in the same transaction as the
// key.
package buntx

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/uptrace/bun"

	"github.com/idemgo/idem"
)

// Order is a row of the orders table.
type Order struct {
	bun.BaseModel `bun:"table:orders" json:"-"`

	ID   int64  `bun:"id,pk,autoincrement" json:"id"`
	Item string `bun:"item,notnull" json:"item"`
}

// errNotClaimed rolls back RunInTx when Do did not claim the key: Do wrote
// nothing then, and a rollback says so more plainly than an empty commit.
var errNotClaimed = errors.New("buntx: key not claimed")

// PlaceOrder inserts an order for item at most once per key, and answers
// with the order as JSON: a retry with the same key and item replays the
// first answer, and the same key with another item is a Mismatch.
//
// RunInTx commits when its function returns nil. That function returns nil
// only on Claimed, when the order and the key are both written in tx; an
// error of Do, or any other outcome, rolls back.
func PlaceOrder(ctx context.Context, db *bun.DB, store *idem.Store, key, item string) (idem.Result, error) {
	var res idem.Result
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		hash := idem.Fingerprint([]byte("place order"), []byte(item))
		var err error
		res, err = store.Do(ctx, tx.Tx, key, hash, func(ctx context.Context, _ *sql.Tx) (idem.Response, error) {
			// The *sql.Tx that Do passes is tx.Tx; writing through tx
			// keeps bun's models and its RETURNING of the new id.
			o := &Order{Item: item}
			if _, err := tx.NewInsert().Model(o).Exec(ctx); err != nil {
				return idem.Response{}, err
			}
			body, err := json.Marshal(o)
			return idem.Response{Status: 201, Body: body}, err
		})
		switch {
		case err != nil:
			return err
		case res.Outcome != idem.Claimed:
			return errNotClaimed
		}
		return nil
	})
	if errors.Is(err, errNotClaimed) {
		return res, nil
	}
	if err != nil {
		// An error of the commit leaves open whether the order was
		// placed: do the call again with the same key, which replays if
		// it was and places it if it was not.
		return idem.Result{}, err
	}
	return res, nil
}
