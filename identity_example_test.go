package idem_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	"github.com/idemgo/idem"
)

// A Func learns from its context which request it serves. Here two API
// clients send one key, which the service gives a key space per client, as
// idemhttp and idemgrpc do; each order row is keyed by the request's
// Identity, so that the two clients' orders do not meet, and the Events
// tell the clients apart by their scope.
func ExampleIdentityFrom() {
	db, _, cleanup := openExampleDB()
	defer cleanup()
	if _, err := db.Exec(`CREATE TABLE placed (request TEXT PRIMARY KEY, item TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	store, err := idem.New(idem.SQLite(), idem.WithObserver(func(_ context.Context, e idem.Event) {
		fmt.Println("event:", e.Outcome, "for", e.Scope)
	}))
	if err != nil {
		log.Fatal(err)
	}
	place := func(client, key, item string) {
		ctx := idem.WithScope(context.Background(), client)
		stored := client + ":" + key // a key space per client
		_, err := store.DoTx(ctx, db, nil, stored, idem.Fingerprint([]byte(item)), func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			id, _ := idem.IdentityFrom(ctx)
			fmt.Printf("placing %s for %s, request %s\n", item, id.Scope, id.Key)
			_, err := tx.ExecContext(ctx, `INSERT INTO placed (request, item) VALUES (?, ?)`, id.Key, item)
			return idem.Response{Status: 201}, err
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	place("acct_a", "order-1", "book")
	place("acct_b", "order-1", "pen")
	place("acct_a", "order-1", "book") // a retry: replayed, nothing placed

	var n int
	if err := db.QueryRow(`SELECT count(*) FROM placed`).Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", n)
	// Prints:
	// placing book for acct_a, request acct_a:order-1
	// event: claimed for acct_a
	// placing pen for acct_b, request acct_b:order-1
	// event: claimed for acct_b
	// event: replay for acct_a
	// orders: 2
}
