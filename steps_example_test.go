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

// A checkout that records the order, charges a card with a payment
// provider, records the charge, and confirms. The provider is down on the
// first try: the order is committed, and the retry resumes at the charge,
// sending the provider the same key again.
func ExampleStore_Run() {
	db, store, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	if _, err := db.Exec(`ALTER TABLE orders ADD COLUMN charge TEXT`); err != nil {
		log.Fatal(err)
	}

	providerDown := true
	charges := map[string]string{} // the provider's own record, by its idempotency key
	charge := func(callKey string) (string, error) {
		if providerDown {
			return "", errors.New("provider unreachable")
		}
		if _, ok := charges[callKey]; !ok {
			charges[callKey] = fmt.Sprintf("ch_%d", len(charges)+1)
		}
		return charges[callKey], nil
	}

	checkout := func(key, item string) {
		var chargeID string
		hash := idem.Fingerprint([]byte("POST /checkout"), []byte(item))
		res, err := store.Run(ctx, db, key, hash,
			idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES (?)`, item)
				return err
			}),
			idem.Call("charge", func(ctx context.Context, callKey string) (err error) {
				chargeID, err = charge(callKey)
				return err
			}),
			idem.Final("charged", func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
				_, err := tx.ExecContext(ctx, `UPDATE orders SET charge = ? WHERE item = ?`, chargeID, item)
				return idem.Response{Status: http.StatusCreated, Body: []byte(chargeID)}, err
			}),
		)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(res.Outcome, res.Response.Status, string(res.Response.Body))
	}

	checkout("key-1", "book")
	providerDown = false
	checkout("key-1", "book")
	checkout("key-1", "book")

	var orders, charged int
	if err := db.QueryRow(`SELECT count(*), count(charge) FROM orders`).Scan(&orders, &charged); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", orders, "charged:", charged, "charges at the provider:", len(charges))
	// Output:
	// error: idem: step "charge": provider unreachable
	// claimed 201 ch_1
	// replay 201 ch_1
	// orders: 1 charged: 1 charges at the provider: 1
}
