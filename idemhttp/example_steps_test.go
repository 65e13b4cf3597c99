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

// cardProvider stands for a payment provider: it charges once per
// idempotency key, and is down for its first call.
type cardProvider struct {
	charges map[string]string // by idempotency key
	calls   int
}

func (p *cardProvider) charge(callKey string) (string, error) {
	if p.calls++; p.calls == 1 {
		return "", errors.New("provider: 502 Bad Gateway")
	}
	if _, ok := p.charges[callKey]; !ok {
		p.charges[callKey] = fmt.Sprintf("ch_%d", len(p.charges)+1)
	}
	return p.charges[callKey], nil
}

// request names the request whose step runs with ctx, as the Store keeps
// it (idem.IdentityFrom), for the rows that the steps write.
func request(ctx context.Context) string {
	id, _ := idem.IdentityFrom(ctx)
	return id.Key
}

func ExampleMiddleware_Steps() {
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
	// request names the order's request by its idem.Identity: the stored
	// key, which holds the client's scope, so that two clients' requests
	// with one Idempotency-Key are two orders.
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, request TEXT UNIQUE NOT NULL, item TEXT NOT NULL, charge TEXT)`); err != nil {
		log.Fatal(err)
	}
	store, err := idem.New(idem.SQLite())
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}
	provider := &cardProvider{charges: map[string]string{}}

	// checkout charges the card between two phases: the order commits
	// before the call, and the charge after it.
	checkout := func(r *http.Request) ([]idem.Step, error) {
		var order struct{ Item string }
		if err := json.NewDecoder(r.Body).Decode(&order); err != nil || order.Item == "" {
			return nil, idem.Finish(idem.Response{Status: http.StatusBadRequest, Body: []byte("no item\n")})
		}
		var chargeID string
		return []idem.Step{
			idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO orders (request, item) VALUES (?, ?)`, request(ctx), order.Item)
				return err
			}),
			idem.Call("charge", func(ctx context.Context, callKey string) (err error) {
				chargeID, err = provider.charge(callKey) // callKey is the same on every retry
				return err
			}),
			idem.Final("confirm", func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
				var id int64
				err := tx.QueryRowContext(ctx, `UPDATE orders SET charge = ? WHERE request = ? RETURNING id`, chargeID, request(ctx)).Scan(&id)
				body := fmt.Sprintf(`{"order":%d,"charge":%q}`, id, chargeID)
				return idem.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}, err
			}),
		}, nil
	}
	mw, err := idemhttp.New(store, db, nil, idemhttp.WithSingleClient()) // one client here; a real API names it with WithScope
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /checkout", mw.Steps(checkout))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(key, body string) {
		req, _ := http.NewRequest("POST", srv.URL+"/checkout", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 500 {
			var p idemhttp.Problem
			_ = json.Unmarshal(b, &p)
			b = []byte(p.Title)
		}
		fmt.Printf("%d replayed=%q %s\n", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), bytes.TrimSpace(b))
	}
	post("5b0c", `{"item":"book"}`) // the provider is down: the order stays, unfinished
	post("5b0c", `{"item":"book"}`) // the retry resumes after the order, and charges once
	post("5b0c", `{"item":"book"}`) // a retry of the finished request: the stored response
	post("7d2e", `{}`)              // refused before any step: nothing is stored

	var orders int
	if err := db.QueryRow(`SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("orders: %d, provider calls: %d, charges: %d\n", orders, provider.calls, len(provider.charges))
	// Prints:
	// 503 replayed="" Request unfinished
	// 201 replayed="" {"order":1,"charge":"ch_1"}
	// 201 replayed="true" {"order":1,"charge":"ch_1"}
	// 400 replayed="" no item
	// orders: 1, provider calls: 2, charges: 1
}
