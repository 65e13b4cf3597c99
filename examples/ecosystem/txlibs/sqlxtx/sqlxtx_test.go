package sqlxtx_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/ecosystem/internal/testdb"
	"github.com/idemgo/idem/examples/ecosystem/txlibs/sqlxtx"
)

func ExamplePlaceOrder() {
	ctx := context.Background()
	sqldb, err := testdb.Open(ctx) // SQLite with an orders table and idem's table
	if err != nil {
		log.Fatal(err)
	}
	defer sqldb.Close()
	db := sqlx.NewDb(sqldb.DB, "sqlite")
	store, err := idem.New(idem.SQLite())
	if err != nil {
		log.Fatal(err)
	}

	for _, call := range []struct{ key, item string }{
		{"order-1", "book"}, // claims the key and places the order
		{"order-1", "book"}, // a retry: replays the first answer
		{"order-1", "pen"},  // another request under the same key
	} {
		res, err := sqlxtx.PlaceOrder(ctx, db, store, call.key, call.item)
		if err != nil {
			log.Fatal(err)
		}
		if res.Outcome == idem.Mismatch {
			fmt.Println(res.Outcome, "(answer 422)")
			continue
		}
		fmt.Println(res.Outcome, res.Response.Status, string(res.Response.Body))
	}

	var orders []sqlxtx.Order
	if err := db.SelectContext(ctx, &orders, `SELECT id, item FROM orders`); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", orders)
	// Output:
	// claimed 201 {"id":1,"item":"book"}
	// replay 201 {"id":1,"item":"book"}
	// mismatch (answer 422)
	// orders: [{1 book}]
}

// TestRollback shows that the key and the order share the sqlx transaction:
// rolling it back after a Claimed leaves neither, and the next call claims
// the key anew.
func TestRollback(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tdb := testdb.OpenT(t)
	db := sqlx.NewDb(tdb.DB, "sqlite")
	store := testdb.StoreT(t)

	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.Do(ctx, tx.Tx, "order-1", idem.Fingerprint([]byte("book")), func(ctx context.Context, _ *sql.Tx) (idem.Response, error) {
		_, err := tx.NamedExecContext(ctx, `INSERT INTO orders (item) VALUES (:item)`, sqlxtx.Order{Item: "book"})
		return idem.Response{Status: 201}, err
	})
	if err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("Do: %v, %v", res.Outcome, err)
	}
	if err := tx.Rollback(); err != nil { // as if a later step of the request failed
		t.Fatal(err)
	}
	if n := tdb.CountT(t, "orders"); n != 0 {
		t.Errorf("%d orders after the rollback, want 0", n)
	}
	if _, err := store.Lookup(ctx, tdb.DB, "order-1"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup after the rollback: %v, want ErrNotFound", err)
	}

	res, err = sqlxtx.PlaceOrder(ctx, db, store, "order-1", "book")
	if err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("PlaceOrder after the rollback: %v, %v; want claimed", res.Outcome, err)
	}
	if n := tdb.CountT(t, "orders"); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
}
