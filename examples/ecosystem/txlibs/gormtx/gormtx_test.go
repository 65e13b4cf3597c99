package gormtx_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"testing"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/ecosystem/internal/testdb"
	"github.com/idemgo/idem/examples/ecosystem/txlibs/gormtx"
)

// openGORM opens GORM on the existing *sql.DB, silently, so that an
// Example's output is its own.
func openGORM(sqldb *sql.DB) (*gorm.DB, error) {
	return gorm.Open(sqlite.New(sqlite.Config{Conn: sqldb}), &gorm.Config{Logger: logger.Discard})
}

func ExamplePlaceOrder() {
	ctx := context.Background()
	sqldb, err := testdb.Open(ctx) // SQLite (modernc.org/sqlite) with an orders table and idem's table
	if err != nil {
		log.Fatal(err)
	}
	defer sqldb.Close()
	db, err := openGORM(sqldb.DB)
	if err != nil {
		log.Fatal(err)
	}
	store, err := idem.New(idem.SQLite())
	if err != nil {
		log.Fatal(err)
	}

	for _, call := range []struct{ key, item string }{
		{"order-1", "book"}, // claims the key and places the order
		{"order-1", "book"}, // a retry: replays the first answer
		{"order-1", "pen"},  // another request under the same key
	} {
		res, err := gormtx.PlaceOrder(ctx, db, store, call.key, call.item)
		if err != nil {
			log.Fatal(err)
		}
		if res.Outcome == idem.Mismatch {
			fmt.Println(res.Outcome, "(answer 422)")
			continue
		}
		fmt.Println(res.Outcome, res.Response.Status, string(res.Response.Body))
	}

	var orders []gormtx.Order
	if err := db.Order("id").Find(&orders).Error; err != nil {
		log.Fatal(err)
	}
	for _, o := range orders {
		fmt.Println("order", o.ID, o.Item)
	}
	// Output:
	// claimed 201 {"id":1,"item":"book"}
	// replay 201 {"id":1,"item":"book"}
	// mismatch (answer 422)
	// order 1 book
}

// TestRollback shows that the key and the order share GORM's transaction:
// when the function of Transaction fails after a Claimed, neither is kept,
// and the next call claims the key anew.
func TestRollback(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tdb := testdb.OpenT(t)
	db, err := openGORM(tdb.DB)
	if err != nil {
		t.Fatal(err)
	}
	store := testdb.StoreT(t)

	later := errors.New("a later step of the request failed")
	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		sqlTx, err := gormtx.SQLTx(tx)
		if err != nil {
			return err
		}
		res, err := store.Do(ctx, sqlTx, "order-1", idem.Fingerprint([]byte("book")), func(ctx context.Context, _ *sql.Tx) (idem.Response, error) {
			return idem.Response{Status: 201}, tx.Create(&gormtx.Order{Item: "book"}).Error
		})
		if err != nil || res.Outcome != idem.Claimed {
			t.Errorf("Do: %v, %v", res.Outcome, err)
		}
		return later
	})
	if !errors.Is(err, later) {
		t.Fatalf("Transaction: %v", err)
	}
	if n := tdb.CountT(t, "orders"); n != 0 {
		t.Errorf("%d orders after the rollback, want 0", n)
	}
	if _, err := store.Lookup(ctx, tdb.DB, "order-1"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup after the rollback: %v, want ErrNotFound", err)
	}

	res, err := gormtx.PlaceOrder(ctx, db, store, "order-1", "book")
	if err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("PlaceOrder after the rollback: %v, %v; want claimed", res.Outcome, err)
	}
	if n := tdb.CountT(t, "orders"); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
}

// TestPreparedStatements shows the case SQLTx refuses: with PrepareStmt,
// GORM's transaction is not a *sql.Tx, and PlaceOrder fails rather than
// claim the key outside the effect's transaction.
func TestPreparedStatements(t *testing.T) {
	t.Parallel()
	tdb := testdb.OpenT(t)
	db, err := gorm.Open(sqlite.New(sqlite.Config{Conn: tdb.DB}), &gorm.Config{Logger: logger.Discard, PrepareStmt: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gormtx.PlaceOrder(t.Context(), db, testdb.StoreT(t), "order-1", "book"); err == nil {
		t.Fatal("PlaceOrder with PrepareStmt succeeded")
	}
	if n := tdb.CountT(t, "orders"); n != 0 {
		t.Errorf("%d orders, want 0", n)
	}
}
