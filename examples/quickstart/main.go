// Command quickstart shows idem on an embedded SQLite database: a request
// that is claimed, a retry after a lost response that replays it, and a key
// reused for another request, which is refused.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
)

func main() {
	path := flag.String("db", "", "SQLite database file (default: a new file in a temporary directory)")
	flag.Parse()
	if *path == "" {
		dir, err := os.MkdirTemp("", "idem-quickstart")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		*path = filepath.Join(dir, "shop.db")
	}
	if err := run(context.Background(), *path); err != nil {
		log.Fatal(err)
	}
}

// shop is a tiny order service whose one endpoint is protected by a key.
type shop struct {
	db    *sql.DB
	store *idem.Store
}

func run(ctx context.Context, path string) error {
	// SQLite lets one transaction write at a time: _txlock=immediate makes
	// each wait for the write lock when it begins, up to the busy timeout.
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	store, err := idem.New(idem.SQLite()) // keys are kept for idem.DefaultRetention, 24 hours
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx, db); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)`); err != nil {
		return err
	}
	s := &shop{db: db, store: store}

	fmt.Println("1. A client orders a book with key order-7f3a. The server answers")
	resp, err := s.placeOrder(ctx, "order-7f3a", "book")
	if err != nil {
		return err
	}
	fmt.Printf("   %s\n", resp)
	fmt.Println("   but the response is lost: the client cannot tell whether the order was placed.")

	fmt.Println("2. It retries with the same key and the same request:")
	resp, err = s.placeOrder(ctx, "order-7f3a", "book")
	if err != nil {
		return err
	}
	fmt.Printf("   %s\n", resp)

	fmt.Println("3. A buggy client reuses the key for a different order:")
	resp, err = s.placeOrder(ctx, "order-7f3a", "kettle")
	if err != nil {
		return err
	}
	fmt.Printf("   %s\n", resp)

	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil {
		return err
	}
	fmt.Printf("Orders in the database: %d\n", n)
	if n != 1 {
		return fmt.Errorf("want exactly one order, the book, found %d", n)
	}
	return nil
}

// placeOrder is the handler: it inserts an order and its key in one
// transaction, and answers as an HTTP API would.
func (s *shop) placeOrder(ctx context.Context, key, item string) (string, error) {
	hash := idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(item))
	res, err := s.store.DoTx(ctx, s.db, nil, key, hash, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		r, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES (?)`, item)
		if err != nil {
			return idem.Response{}, err
		}
		id, err := r.LastInsertId()
		if err != nil {
			return idem.Response{}, err
		}
		return idem.Response{Status: 201, Body: fmt.Appendf(nil, `{"order":%d,"item":%q}`, id, item)}, nil
	})
	if err != nil {
		return "", err
	}
	switch res.Outcome {
	case idem.Claimed:
		return fmt.Sprintf("%d %s (claimed: the order was placed)", res.Response.Status, res.Response.Body), nil
	case idem.Replay:
		return fmt.Sprintf("%d %s (replay: the stored response of the first request, nothing done again)", res.Response.Status, res.Response.Body), nil
	case idem.Mismatch:
		return "422 Unprocessable Content (mismatch: this key belongs to another request)", nil
	default:
		return "409 Conflict (in flight: the first request is still running)", nil
	}
}
