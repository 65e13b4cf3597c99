package buntx_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"testing"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/ecosystem/internal/testdb"
	"github.com/idemgo/idem/examples/ecosystem/txlibs/buntx"
)

func ExamplePlaceOrder() {
	ctx := context.Background()
	sqldb, err := testdb.Open(ctx) // SQLite (modernc.org/sqlite) with an orders table and idem's table
	if err != nil {
		log.Fatal(err)
	}
	defer sqldb.Close()
	// bun on a *sql.DB opened with modernc.org/sqlite, the driver whose
	// errors idem's SQLite dialect reads.
	db := bun.NewDB(sqldb.DB, sqlitedialect.New())
	store, err := idem.New(idem.SQLite())
	if err != nil {
		log.Fatal(err)
	}

	for _, call := range []struct{ key, item string }{
		{"order-1", "book"}, // claims the key and places the order
		{"order-1", "book"}, // a retry: replays the first answer
		{"order-1", "pen"},  // another request under the same key
	} {
		res, err := buntx.PlaceOrder(ctx, db, store, call.key, call.item)
		if err != nil {
			log.Fatal(err)
		}
		if res.Outcome == idem.Mismatch {
			fmt.Println(res.Outcome, "(answer 422)")
			continue
		}
		fmt.Println(res.Outcome, res.Response.Status, string(res.Response.Body))
	}

	var orders []buntx.Order
	if err := db.NewSelect().Model(&orders).Order("id").Scan(ctx); err != nil {
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

// TestRollback shows that the key and the order share bun's transaction:
// when the function of RunInTx fails after a Claimed, neither is kept, and
// the next call claims the key anew.
func TestRollback(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tdb := testdb.OpenT(t)
	db := bun.NewDB(tdb.DB, sqlitedialect.New())
	store := testdb.StoreT(t)

	later := errors.New("a later step of the request failed")
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		res, err := store.Do(ctx, tx.Tx, "order-1", idem.Fingerprint([]byte("book")), func(ctx context.Context, _ *sql.Tx) (idem.Response, error) {
			_, err := tx.NewInsert().Model(&buntx.Order{Item: "book"}).Exec(ctx)
			return idem.Response{Status: 201}, err
		})
		if err != nil || res.Outcome != idem.Claimed {
			t.Errorf("Do: %v, %v", res.Outcome, err)
		}
		return later
	})
	if !errors.Is(err, later) {
		t.Fatalf("RunInTx: %v", err)
	}
	if n := tdb.CountT(t, "orders"); n != 0 {
		t.Errorf("%d orders after the rollback, want 0", n)
	}
	if _, err := store.Lookup(ctx, tdb.DB, "order-1"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup after the rollback: %v, want ErrNotFound", err)
	}

	res, err := buntx.PlaceOrder(ctx, db, store, "order-1", "book")
	if err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("PlaceOrder after the rollback: %v, %v; want claimed", res.Outcome, err)
	}
	if n := tdb.CountT(t, "orders"); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
}
