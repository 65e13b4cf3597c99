package idempgx_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/idempgx"
)

// A payment runs at most once per idempotency key: the key's record and the
// payment commit together, in the transaction DoTx begins on the pool.
func ExampleStore_DoTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := idem.New(idem.Postgres())
	if err != nil {
		log.Fatal(err)
	}
	pg := idempgx.New(store)
	if err := pg.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}

	body := []byte(`{"to":"acct-9","cents":1200}`)
	res, err := pg.DoTx(ctx, pool, pgx.TxOptions{}, "pay-2f1c", idem.Fingerprint([]byte("POST /payments"), body),
		func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
			var id int64
			err := tx.QueryRow(ctx, "INSERT INTO payments (to_account, cents) VALUES ($1, $2) RETURNING id", "acct-9", 1200).Scan(&id)
			if err != nil {
				return idem.Response{}, err
			}
			return idem.Response{Status: http.StatusCreated, Body: fmt.Appendf(nil, `{"payment":%d}`, id)}, nil
		})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Outcome, res.Response.Status) // claimed 201 the first time, replay 201 after
}

// Handlers behind the middleware write their effect in the pgx transaction
// that idempgx.Tx returns.
func ExampleNewMiddleware() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	store, err := idem.New(idem.Postgres())
	if err != nil {
		log.Fatal(err)
	}
	m, err := idempgx.NewMiddleware(store, pool, pgx.TxOptions{}, idemhttp.WithScope(func(r *http.Request) (string, error) {
		return r.Header.Get("X-Account"), nil // who the client is, as the service authenticated it
	}))
	if err != nil {
		log.Fatal(err)
	}
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := idempgx.Tx(r.Context())
		if _, err := tx.Exec(r.Context(), "INSERT INTO orders (item) VALUES ($1)", r.FormValue("item")); err != nil {
			http.Error(w, "cannot store the order", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	log.Fatal(http.ListenAndServe("localhost:8080", m.Handler(orders)))
}
