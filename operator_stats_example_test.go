package idem_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/idemgo/idem"
)

// Stats says what the table holds: here two requests of two days ago,
// whose records have expired, and one of today. CountExpired follows what a
// purge leaves.
func ExampleStore_Stats() {
	db, _, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()

	now := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	store, err := idem.New(idem.SQLite(), idem.WithClock(func() time.Time { return now }))
	if err != nil {
		log.Fatal(err)
	}
	order := func(key string) {
		_, err := store.DoTx(ctx, db, nil, key, idem.Fingerprint([]byte(key)), func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			_, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES ('book')`)
			return idem.Response{Status: 201}, err
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	now = now.Add(-48 * time.Hour)
	order("order-1")
	order("order-2")
	now = now.Add(48 * time.Hour)
	order("order-3")

	st, err := store.Stats(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d live, %d in flight, %d expired; the oldest claimed %v ago\n", st.Live, st.InFlight, st.Expired, now.Sub(st.Oldest))

	purged, err := store.Purge(ctx, db, 100)
	if err != nil {
		log.Fatal(err)
	}
	left, err := store.CountExpired(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("purged %d, %d expired left\n", purged, left)
	// Prints:
	// 1 live, 0 in flight, 2 expired; the oldest claimed 48h0m0s ago
	// purged 2, 0 expired left
}
