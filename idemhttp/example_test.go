package idemhttp_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

func ExampleNew() {
	dir, err := os.MkdirTemp("", "idemhttp-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_txlock=immediate&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	store, err := idem.New(idem.SQLite())
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}

	createOrder := func(w http.ResponseWriter, r *http.Request) {
		var order struct{ Item string }
		if err := json.NewDecoder(r.Body).Decode(&order); err != nil {
			http.Error(w, "bad order", http.StatusBadRequest)
			return
		}
		// The order is written in the middleware's transaction, with the key.
		var id int64
		err := idemhttp.Tx(r.Context()).QueryRowContext(r.Context(),
			`INSERT INTO orders (item) VALUES (?) RETURNING id`, order.Item).Scan(&id)
		if err != nil {
			http.Error(w, "database error", http.StatusInternalServerError) // not stored: a retry runs again
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/orders/%d", id))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"item":%q}`, id, order.Item)
	}
	protect := idemhttp.New(store, db,
		idemhttp.Required(),
		// One shop, one client here; a real API names the client.
		idemhttp.Scope(func(r *http.Request) (string, error) { return "shop-frontend", nil }),
	)
	mux := http.NewServeMux()
	mux.Handle("POST /orders", protect(http.HandlerFunc(createOrder)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(key, body string) {
		req, _ := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d replayed=%q %s\n", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), bytes.TrimSpace(b))
	}
	post("8e1f0a2c", `{"item":"book"}`)   // the first request
	post("8e1f0a2c", `{"item":"book"}`)   // its retry: the stored response
	post("8e1f0a2c", `{"item":"kettle"}`) // the key reused for another order

	var n int
	if err := db.QueryRow(`SELECT count(*) FROM orders`).Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", n)
	// Output:
	// 201 replayed="" {"id":1,"item":"book"}
	// 201 replayed="true" {"id":1,"item":"book"}
	// 422 replayed="" {"type":"https://github.com/idemgo/idem/blob/main/docs/http.md#key-reused","title":"Idempotency key reused","status":422,"detail":"This idempotency key was used for a different request (another method, path, query or body). Nothing was done. Use a new key for a new request."}
	// orders: 1
}

func ExampleStoredKey() {
	// An operator looks a client's key up: store.Lookup(ctx, db, key).
	key := idemhttp.StoredKey("acct_42", "8e1f0a2c")
	fmt.Println(key)
	fmt.Println(len(key))
	// Output:
	// 592f2119697cff2f2aacf33a931e1ded4cc882968b85ecff42fe1bafd3068b60:8e1f0a2c
	// 73
}

func ExampleScope() {
	var (
		store *idem.Store // made with idem.New
		db    *sql.DB     // opened with the database's driver
	)
	// The authentication middleware in front of idemhttp puts the
	// account in the request's context; the scope reads it back.
	type accountKey struct{}
	scope := idemhttp.Scope(func(r *http.Request) (string, error) {
		acct, ok := r.Context().Value(accountKey{}).(string)
		if !ok {
			return "", errors.New("no account in the request context")
		}
		return acct, nil
	})
	protect := idemhttp.New(store, db, scope, idemhttp.Required())

	createPayment := func(w http.ResponseWriter, r *http.Request) {
		tx := idemhttp.Tx(r.Context())
		_ = tx // insert the payment in tx
		w.WriteHeader(http.StatusCreated)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", protect(http.HandlerFunc(createPayment)))
}
