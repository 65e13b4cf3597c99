package idem_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	"github.com/idemgo/idem"
)

// A Store of the default policy claims through a transaction until it has
// seen 32 DoTx calls; when most of them were retries of finished requests,
// it answers the next retries from one read, and after a run of new keys it
// goes back to claiming straight away.
func ExampleStore_LooksUpFirst() {
	db, store, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	addBook := func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES ('book')`)
		return idem.Response{Status: 201}, err
	}
	order := func(key string) {
		if _, err := store.DoTx(ctx, db, nil, key, idem.Fingerprint([]byte("book")), addBook); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("new store:", store.LooksUpFirst())
	order("order-1")
	for i := 0; i < 30; i++ {
		order("order-1") // a client that retries and retries
	}
	fmt.Println("after 31 calls:", store.LooksUpFirst())
	order("order-1")
	fmt.Println("after 32 calls:", store.LooksUpFirst())
	for i := 0; i < 20; i++ {
		order(fmt.Sprintf("order-%d", i+2))
	}
	fmt.Println("after 20 new orders:", store.LooksUpFirst())
	// Prints:
	// new store: false
	// after 31 calls: false
	// after 32 calls: true
	// after 20 new orders: false
}
