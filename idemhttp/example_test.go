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

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

func ExampleNew() {
	dir, err := os.MkdirTemp("", "idemhttp-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_txlock=immediate&_pragma=busy_timeout(5000)") // modernc.org/sqlite
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
	mw, err := idemhttp.New(store, db, nil, // nil: the database's transaction options
		idemhttp.WithKeyRequired(),
		// One shop, one client here; a real API names the client (WithScope).
		idemhttp.WithSingleClient(),
	)
	if err != nil {
		log.Fatal(err) // a bad configuration stops the start-up
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", mw.Handler(http.HandlerFunc(createOrder)))
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
	// Prints:
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

func ExampleWithScope() {
	var (
		store *idem.Store // made with idem.New
		db    *sql.DB     // opened with the database's driver
	)
	// The authentication middleware in front of idemhttp puts the
	// account in the request's context; the scope reads it back.
	type accountKey struct{}
	scope := idemhttp.WithScope(func(r *http.Request) (string, error) {
		acct, ok := r.Context().Value(accountKey{}).(string)
		if !ok {
			return "", errors.New("no account in the request context")
		}
		return acct, nil
	})
	mw, err := idemhttp.New(store, db, nil, scope, idemhttp.WithKeyRequired())
	if err != nil {
		log.Fatal(err)
	}

	createPayment := func(w http.ResponseWriter, r *http.Request) {
		tx := idemhttp.Tx(r.Context())
		_ = tx // insert the payment in tx
		w.WriteHeader(http.StatusCreated)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw.Handler(http.HandlerFunc(createPayment)))
}

// A handler can be tested alone, without the middleware: WithTx gives it a
// transaction of the test's own, as the middleware would give it its own,
// and the test rolls it back.
func ExampleWithTx() {
	createOrder := func(w http.ResponseWriter, r *http.Request) {
		item, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "bad order", http.StatusBadRequest)
			return
		}
		res, err := idemhttp.Tx(r.Context()).ExecContext(r.Context(), `INSERT INTO orders (item) VALUES (?)`, string(item))
		if err != nil {
			http.Error(w, "database error", http.StatusInternalServerError)
			return
		}
		id, _ := res.LastInsertId()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, id)
	}

	dir, err := os.MkdirTemp("", "idemhttp-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")) // modernc.org/sqlite
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback() // the test ends the transaction the middleware would end

	req := httptest.NewRequest("POST", "/orders", strings.NewReader("book"))
	rec := httptest.NewRecorder()
	createOrder(rec, req.WithContext(idemhttp.WithTx(req.Context(), tx)))
	fmt.Println(rec.Code, rec.Body.String())
	// Prints: 201 {"id":1}
}

// Identify names a request as the middleware stores it: the stored key, and
// the request hash, which docs/http.md defines.
func ExampleMiddleware_Identify() {
	store, err := idem.New(idem.Postgres())
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", ":memory:") // modernc.org/sqlite; Identify sends no statement
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	mw, err := idemhttp.New(store, db, nil, idemhttp.WithScope(func(r *http.Request) (string, error) {
		return r.Header.Get("X-Account"), nil
	}))
	if err != nil {
		log.Fatal(err)
	}

	req := httptest.NewRequest("POST", "/orders?express=1", strings.NewReader(`{"item":"book"}`))
	req.Header.Set("Idempotency-Key", "8e1f0a2c")
	req.Header.Set("X-Account", "acct_42")
	key, hash, err := mw.Identify(req)
	if err != nil {
		log.Fatal(err)
	}
	same := idem.Fingerprint([]byte("idemhttp/1"), []byte("acct_42"), []byte("POST"),
		[]byte("/orders"), []byte("express=1"), []byte(`{"item":"book"}`))
	fmt.Println(key == idemhttp.StoredKey("acct_42", "8e1f0a2c"))
	fmt.Println(bytes.Equal(hash, same))
	// Prints:
	// true
	// true
}
