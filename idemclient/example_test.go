package idemclient_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemclient"
	"github.com/idemgo/idem/idemhttp"
)

func ExampleClient_Do() {
	dir, err := os.MkdirTemp("", "idemclient-example")
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
	mw, err := idemhttp.New(store, db, nil, idemhttp.WithSingleClient())
	if err != nil {
		log.Fatal(err)
	}
	server := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id int64
		err := idemhttp.Tx(r.Context()).QueryRowContext(r.Context(), `INSERT INTO orders (item) VALUES ('book') RETURNING id`).Scan(&id)
		if err != nil {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d\n", id)
	})))
	defer server.Close()

	// The network loses the answer to the first attempt, after the server
	// has committed the order.
	var attempts atomic.Int32
	lossy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, _ := http.NewRequest(r.Method, server.URL, r.Body)
		out.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if attempts.Add(1) == 1 {
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
			return
		}
		w.Header().Set("Idempotent-Replayed", resp.Header.Get("Idempotent-Replayed"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	defer lossy.Close()

	client, err := idemclient.New()
	if err != nil {
		log.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, lossy.URL, strings.NewReader(`{"item":"book"}`))
	req.Header.Set("Idempotency-Key", idemclient.NewKey()) // made once per intention, and kept with it
	resp, err := client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s", resp.StatusCode, body)
	fmt.Println("attempts:", resp.Attempts, "replayed:", resp.Replayed)

	var orders int
	if err := db.QueryRow(`SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", orders)
	// Prints:
	// 201 order 1
	// attempts: 2 replayed: true
	// orders: 1
}

// A server asks for a pause of a day and a second, past the client's
// minute of DefaultMaxElapsed: Do does not wait, and returns its answer at
// once, with GaveUp saying why.
func ExampleClient_Do_gaveUp() {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "86401")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer server.Close()

	client, err := idemclient.New()
	if err != nil {
		log.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, server.URL, strings.NewReader(`{"item":"book"}`))
	resp, err := client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, "attempts:", resp.Attempts)
	if errors.Is(resp.GaveUp, idemclient.ErrMaxElapsed) {
		fmt.Println("gave up: the server asked to wait past WithMaxElapsed; retry later with resp.Key")
	}
	// Output:
	// 503 attempts: 1
	// gave up: the server asked to wait past WithMaxElapsed; retry later with resp.Key
}
