package idem_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idemgo/idem"
)

// openExampleDB opens a SQLite database in a temporary directory with the
// settings the SQLite dialect asks for, creates an orders table, and makes a
// Store with its table.
func openExampleDB() (db *sql.DB, store *idem.Store, cleanup func()) {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err = sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_txlock=immediate&_pragma=busy_timeout(5000)") // modernc.org/sqlite
	if err != nil {
		log.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	store, err = idem.New(idem.SQLite())
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}
	return db, store, func() { db.Close(); os.RemoveAll(dir) }
}

func ExampleStore_Do() {
	db, store, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()

	placeOrder := func(key, item string) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		defer tx.Rollback() // a no-op after Commit

		hash := idem.Fingerprint([]byte("POST /orders"), []byte(item))
		res, err := store.Do(ctx, tx, key, hash, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			r, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES (?)`, item)
			if err != nil {
				return idem.Response{}, err
			}
			id, _ := r.LastInsertId()
			return idem.Response{Status: 201, Body: fmt.Appendf(nil, `{"order":%d}`, id)}, nil
		})
		switch {
		case err != nil:
			log.Fatal(err)
		case res.Outcome == idem.Claimed:
			if err := tx.Commit(); err != nil {
				log.Fatal(err)
			}
			fmt.Println(res.Outcome, res.Response.Status, string(res.Response.Body))
		case res.Outcome == idem.Replay:
			fmt.Println(res.Outcome, res.Response.Status, string(res.Response.Body))
		case res.Outcome == idem.Mismatch:
			fmt.Println(res.Outcome, 422)
		case res.Outcome == idem.InFlight:
			fmt.Println(res.Outcome, 409)
		}
	}

	placeOrder("order-7f3a", "book")   // the first request
	placeOrder("order-7f3a", "book")   // its retry, after a lost response
	placeOrder("order-7f3a", "kettle") // the same key for another request

	var orders int
	if err := db.QueryRow(`SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", orders)
	// Prints:
	// claimed 201 {"order":1}
	// replay 201 {"order":1}
	// mismatch 422
	// orders: 1
}

func ExampleStore_DoTx() {
	db, store, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	addBook := func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES ('book')`); err != nil {
			return idem.Response{}, err
		}
		return idem.Response{Status: 201, Body: []byte("ordered")}, nil
	}
	for i := 0; i < 2; i++ {
		res, err := store.DoTx(ctx, db, nil, "order-1", idem.Fingerprint([]byte("book")), addBook)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Outcome, string(res.Response.Body))
	}
	// Prints:
	// claimed ordered
	// replay ordered
}

// A Store of LookupAlways answers the retry of a finished request from
// one read, before DoTx begins a transaction.
func ExampleWithLookupFirst() {
	db, _, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	store, err := idem.New(idem.SQLite(), idem.WithLookupFirst(idem.LookupAlways), idem.WithObserver(func(_ context.Context, e idem.Event) {
		fmt.Println(e.Outcome, "after", e.Attempts, "transaction(s)")
	}))
	if err != nil {
		log.Fatal(err)
	}
	addBook := func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES ('book')`)
		return idem.Response{Status: 201}, err
	}
	for i := 0; i < 2; i++ {
		if _, err := store.DoTx(ctx, db, nil, "order-1", idem.Fingerprint([]byte("book")), addBook); err != nil {
			log.Fatal(err)
		}
	}
	// Prints:
	// claimed after 1 transaction(s)
	// replay after 0 transaction(s)
}

func ExampleRefusable() {
	db, store, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	pay := idem.Refusable(func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES ('book')`); err != nil {
			return idem.Response{}, err
		}
		// The card is declined: undo the order, but remember the answer,
		// so that a retry is declined too instead of charging again.
		return idem.Response{}, idem.Refuse(idem.Response{Status: 402, Body: []byte("card declined")})
	})
	for i := 0; i < 2; i++ {
		res, err := store.DoTx(ctx, db, nil, "payment-1", idem.Fingerprint([]byte("book")), pay)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Outcome, res.Response.Status, string(res.Response.Body))
	}
	var orders int
	if err := db.QueryRow(`SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", orders)
	// Prints:
	// claimed 402 card declined
	// replay 402 card declined
	// orders: 0
}

func ExampleFingerprint() {
	a := idem.Fingerprint([]byte("ab"), []byte("c"))
	b := idem.Fingerprint([]byte("a"), []byte("bc"))
	fmt.Println(len(a), string(a) == string(b))
	// Output: 32 false
}

func ExampleNew() {
	store, err := idem.New(idem.Postgres(),
		idem.WithTable("billing.idempotency_keys"),
		idem.WithRetention(48*time.Hour),
	)
	if err != nil {
		log.Fatal(err)
	}
	for _, stmt := range store.Schema() {
		fmt.Println(strings.TrimSpace(stmt[:strings.IndexByte(stmt, '(')]))
	}
	// Output:
	// CREATE TABLE IF NOT EXISTS "billing"."idempotency_keys"
	// CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at" ON "billing"."idempotency_keys"
}
