package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/idemgo/idem"
)

// An order that charges a card with a payment provider, then sends a
// confirmation by e-mail. Each system deduplicates by the key it is given.
// The provider is down on the first try: the order is committed, and the
// retry resumes at the charge, sending the provider the same key again.
func ExampleStore_Run() {
	db, store, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	if _, err := db.Exec(`ALTER TABLE orders ADD COLUMN charge TEXT`); err != nil {
		log.Fatal(err)
	}

	providerDown := true
	charges := map[string]string{} // the provider's charges, by idempotency key
	mails := map[string]bool{}     // the mail service's messages, by idempotency key

	placeOrder := func(key, item string) {
		var chargeID string
		hash := idem.Fingerprint([]byte("POST /orders"), []byte(item))
		res, err := store.Run(ctx, db, nil, key, hash,
			idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES (?)`, item)
				return err
			}),
			idem.Call("charge", func(ctx context.Context, callKey string) error {
				if providerDown {
					return errors.New("provider unreachable")
				}
				if _, ok := charges[callKey]; !ok {
					charges[callKey] = fmt.Sprintf("ch_%d", len(charges)+1)
				}
				chargeID = charges[callKey]
				return nil
			}),
			idem.Phase("charged", func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `UPDATE orders SET charge = ? WHERE item = ?`, chargeID, item)
				return err
			}),
			idem.Call("mail", func(ctx context.Context, callKey string) error {
				mails[callKey] = true
				return nil
			}),
			idem.Final("confirmed", func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
				var charge string
				err := tx.QueryRowContext(ctx, `SELECT charge FROM orders WHERE item = ?`, item).Scan(&charge)
				return idem.Response{Status: http.StatusCreated, Body: []byte(charge)}, err
			}),
		)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(res.Outcome, res.Response.Status, string(res.Response.Body))
	}

	placeOrder("key-1", "book")
	providerDown = false
	placeOrder("key-1", "book")
	placeOrder("key-1", "book")

	var orders int
	if err := db.QueryRow(`SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", orders, "charges:", len(charges), "mails:", len(mails))
	// Prints:
	// error: idem: step "charge": provider unreachable
	// claimed 201 ch_1
	// replay 201 ch_1
	// orders: 1 charges: 1 mails: 1
}

// A service that runs Resume with ResumeOlderThan(10*time.Second) asks each
// unfinished request when its Resume takes it; ResumeIn is the answer for
// Resume with its defaults. The Store's clock stands still here, so that
// the output is the same on every run.
func ExampleUnfinished_ResumeInOlderThan() {
	db, _, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	store, err := idem.New(idem.SQLite(), idem.WithClock(func() time.Time { return now }))
	if err != nil {
		log.Fatal(err)
	}

	// The provider is down, and the client gives up after the first phase.
	_, err = store.Run(ctx, db, nil, "key-1", idem.Fingerprint([]byte("POST /orders"), []byte("book")),
		idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES ('book')`)
			return err
		}),
		idem.Call("charge", func(context.Context, string) error { return errors.New("provider unreachable") }),
		idem.Final("confirmed", func(context.Context, *sql.Tx) (idem.Response, error) {
			return idem.Response{Status: http.StatusCreated}, nil
		}),
	)
	fmt.Println("error:", err)

	now = now.Add(4 * time.Second)
	list, err := store.Unfinished(ctx, db, 0, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, u := range list {
		fmt.Printf("%s at step %s: Resume takes it in %v, ours in %v\n", u.Key, u.Phase, u.ResumeIn, u.ResumeInOlderThan(10*time.Second))
	}
	// Prints:
	// error: idem: step "charge": provider unreachable
	// key-1 at step order: Resume takes it in 56s, ours in 6s
}
