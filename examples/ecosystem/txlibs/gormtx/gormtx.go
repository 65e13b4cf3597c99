// Package gormtx shows idem's Store.Do inside a gorm.io/gorm transaction.
//
// GORM hides the *sql.Tx, but inside db.Transaction it is the statement's
// connection pool: tx.Statement.ConnPool.(*sql.Tx). Do claims the key
// there, and the model GORM creates is in the same transaction.
//
// Open GORM on the *sql.DB the Store uses, opened with modernc.org/sqlite,
// whose errors idem's SQLite dialect reads:
//
//	gdb, err := gorm.Open(sqlite.New(sqlite.Config{Conn: sqldb}), &gorm.Config{})
//
// gorm.io/driver/sqlite also links mattn's cgo driver, registered as
// "sqlite3"; modernc's is "sqlite", so the two live in one binary without
// a clash. A GORM driver that registers its own database/sql driver as
// "sqlite" could not share a binary with modernc.org/sqlite: database/sql
// panics when a name is registered twice.
package gormtx

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/idemgo/idem"
)

// Order is a row of the orders table.
type Order struct {
	ID   int64  `gorm:"primaryKey" json:"id"`
	Item string `gorm:"not null" json:"item"`
}

// errNotClaimed rolls back the GORM transaction when Do did not claim the
// key: Do wrote nothing then, and a rollback says so more plainly than an
// empty commit.
var errNotClaimed = errors.New("gormtx: key not claimed")

// SQLTx returns the *sql.Tx under a GORM transaction, for Do. It fails when
// GORM runs the transaction on something else, as with PrepareStmt (a
// *gorm.PreparedStmtTX) or a ConnPool of the application's own: unwrap
// those to their *sql.Tx, or open the Store's transactions without them.
func SQLTx(tx *gorm.DB) (*sql.Tx, error) {
	sqlTx, ok := tx.Statement.ConnPool.(*sql.Tx)
	if !ok {
		return nil, fmt.Errorf("gormtx: the transaction runs on %T, not *sql.Tx", tx.Statement.ConnPool)
	}
	return sqlTx, nil
}

// PlaceOrder inserts an order for item at most once per key, and answers
// with the order as JSON: a retry with the same key and item replays the
// first answer, and the same key with another item is a Mismatch.
//
// db.Transaction commits when its function returns nil, which it does only
// on Claimed, when the order and the key are both written in tx; an error
// of Do, or any other outcome, rolls back.
func PlaceOrder(ctx context.Context, db *gorm.DB, store *idem.Store, key, item string) (idem.Result, error) {
	var res idem.Result
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		sqlTx, err := SQLTx(tx)
		if err != nil {
			return err
		}
		hash := idem.Fingerprint([]byte("place order"), []byte(item))
		res, err = store.Do(ctx, sqlTx, key, hash, func(ctx context.Context, _ *sql.Tx) (idem.Response, error) {
			// The *sql.Tx that Do passes is sqlTx; writing through tx
			// keeps GORM's models, hooks and RETURNING of the new id.
			o := &Order{Item: item}
			if err := tx.WithContext(ctx).Create(o).Error; err != nil {
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
