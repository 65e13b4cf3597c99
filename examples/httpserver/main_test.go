package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShop runs the README's flow against the server on SQLite, and on
// PostgreSQL, MariaDB and MySQL when scripts/test provides them. The mysql
// dialect serves both MariaDB and MySQL.
func TestShop(t *testing.T) {
	for _, db := range []struct{ name, dialect, env string }{
		{"sqlite", "sqlite", ""},
		{"postgres", "postgres", "IDEM_POSTGRES_DSN"},
		{"mariadb", "mysql", "IDEM_MARIADB_DSN"},
		{"mysql", "mysql", "IDEM_MYSQL_DSN"},
	} {
		t.Run(db.name, func(t *testing.T) {
			dsn := ""
			if db.env != "" {
				if dsn = os.Getenv(db.env); dsn == "" {
					t.Skipf("%s is not set: run scripts/test, which starts PostgreSQL, MariaDB and MySQL and runs every test", db.env)
				}
			}
			testShop(t, db.dialect, dsn)
		})
	}
}

func testShop(t *testing.T, dialect, dsn string) {
	ctx := context.Background()
	db, err := open(dialect, dsn, filepath.Join(t.TempDir(), "shop.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b [4]byte
	rand.Read(b[:])
	prefix := "shop_" + hex.EncodeToString(b[:]) + "_"
	s, err := newShop(ctx, db, dialect, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, table := range []string{prefix + "orders", prefix + "idempotency_keys"} {
			if _, err := db.ExecContext(ctx, "DROP TABLE "+table); err != nil {
				t.Errorf("drop %s: %v", table, err)
			}
		}
	}()
	srv := httptest.NewServer(s.routes())
	defer srv.Close()

	type reply struct {
		status int
		header http.Header
		body   string
	}
	do := func(method, path, account, key, body string) reply {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if account != "" {
			req.Header.Set("X-Account", account)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return reply{resp.StatusCode, resp.Header, string(b)}
	}
	wantStatus := func(what string, r reply, status int) {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s: %d %s, want %d", what, r.status, r.body, status)
		}
	}

	const book = `{"item": "book", "quantity": 1}`
	first := do("POST", "/orders", "acme", "a5d1c1e0", book)
	wantStatus("first request", first, http.StatusCreated)
	if want := "{\"id\":1,\"account\":\"acme\",\"item\":\"book\",\"quantity\":1}\n"; first.body != want || first.header.Get("Location") != "/orders/1" {
		t.Errorf("first request: %s (Location %q), want %s", first.body, first.header.Get("Location"), want)
	}

	retry := do("POST", "/orders", "acme", "a5d1c1e0", book)
	wantStatus("retry", retry, http.StatusCreated)
	if retry.body != first.body || retry.header.Get("Location") != "/orders/1" || retry.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry: %s, Location %q, Idempotent-Replayed %q; want the first response replayed",
			retry.body, retry.header.Get("Location"), retry.header.Get("Idempotent-Replayed"))
	}

	mismatch := do("POST", "/orders", "acme", "a5d1c1e0", `{"item": "kettle", "quantity": 1}`)
	wantStatus("mismatch", mismatch, http.StatusUnprocessableEntity)
	var p struct{ Type string }
	if err := json.Unmarshal([]byte(mismatch.body), &p); err != nil || !strings.HasSuffix(p.Type, "#key-reused") {
		t.Errorf("mismatch: %s, want a key-reused problem", mismatch.body)
	}

	other := do("POST", "/orders", "globex", "a5d1c1e0", book)
	wantStatus("another account, same key", other, http.StatusCreated)
	if other.header.Get("Location") != "/orders/2" || other.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("another account got %s, want an order of its own", other.body)
	}

	wantStatus("no key", do("POST", "/orders", "acme", "", book), http.StatusBadRequest)
	wantStatus("no account", do("POST", "/orders", "", "b7", book), http.StatusForbidden)
	bad := do("POST", "/orders", "acme", "c9", `{"item": ""}`)
	wantStatus("bad order", bad, http.StatusBadRequest)
	if again := do("POST", "/orders", "acme", "c9", `{"item": ""}`); again.body != bad.body || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("a refused order's retry: %d %s, want the refusal replayed", again.status, again.body)
	}

	got := do("GET", "/orders/1", "", "", "")
	wantStatus("GET /orders/1", got, http.StatusOK)
	if got.body != first.body {
		t.Errorf("GET /orders/1 = %s, want %s", got.body, first.body)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+prefix+"orders").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d orders, want 2", n)
	}
}
