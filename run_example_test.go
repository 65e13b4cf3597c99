package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"net/http"

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
	// Output:
	// error: idem: step "charge": provider unreachable
	// claimed 201 ch_1
	// replay 201 ch_1
	// orders: 1 charges: 1 mails: 1
}
