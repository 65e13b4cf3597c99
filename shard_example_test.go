package idem_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/idemgo/idem"
)

// A store whose table has a shard column keeps each record under the
// customer whose orders it protects, as a sharded database needs when the
// orders are sharded by customer: the customer comes with the context, and
// the same key of two customers is two requests.
func ExampleWithShardColumn() {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_txlock=immediate&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE orders (customer_id INTEGER NOT NULL, item TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	store, err := idem.New(idem.SQLite(), idem.WithShardColumn(idem.ShardInt64()))
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}

	order := func(customer int64, key, item string) {
		ctx := idem.WithShard(context.Background(), customer)
		hash := idem.Fingerprint([]byte("POST /orders"), []byte(item))
		res, err := store.DoTx(ctx, db, nil, key, hash, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO orders (customer_id, item) VALUES (?, ?)`, customer, item); err != nil {
				return idem.Response{}, err
			}
			return idem.Response{Status: 201, Body: fmt.Appendf(nil, `{"customer":%d,"item":%q}`, customer, item)}, nil
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(customer, res.Outcome, string(res.Response.Body))
	}
	order(7, "key-1", "book")
	order(7, "key-1", "book") // a retry of customer 7
	order(8, "key-1", "lamp") // customer 8's own key-1

	_, err = store.Lookup(context.Background(), db, "key-1")
	fmt.Println(err != nil)
	// Output:
	// 7 claimed {"customer":7,"item":"book"}
	// 7 replay {"customer":7,"item":"book"}
	// 8 claimed {"customer":8,"item":"lamp"}
	// true
}
