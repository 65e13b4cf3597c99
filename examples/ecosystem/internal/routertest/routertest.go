// Package routertest is the test that every router example passes: the
// idemhttp middleware mounted in the router makes POST /orders idempotent.
package routertest

import (
	"bytes"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/ecosystem/internal/shop"
	"github.com/idemgo/idem/examples/ecosystem/internal/testdb"
	"github.com/idemgo/idem/idemhttp"
)

// ProtectT is shop.Protect for a test: it fails the test on an error.
func ProtectT(t testing.TB, store *idem.Store, db *sql.DB) *idemhttp.Middleware {
	t.Helper()
	mw, err := shop.Protect(store, db)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// Reply is a response as the client sees it.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Post sends a POST to h with an account, an idempotency key and body, and
// returns the reply.
func Post(t *testing.T, h http.Handler, path, key, body string) Reply {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(shop.AccountHeader, "acct_1")
	if key != "" {
		req.Header.Set(idemhttp.DefaultKeyHeader, key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return Reply{res.StatusCode, res.Header, b}
}

// Run checks the contract of POST /orders on h, a router over db: the
// first request creates one order (201), its retry gets the same bytes
// back marked as replayed without a second order, and a different body
// under the same key is refused with 422.
func Run(t *testing.T, h http.Handler, db *testdb.DB) {
	t.Helper()
	first := Post(t, h, "/orders", "order-1", `{"item":"book"}`)
	if first.Status != http.StatusCreated || first.Header.Get(idemhttp.ReplayedHeader) != "" {
		t.Fatalf("first request: %d %v %s, want 201 not replayed", first.Status, first.Header, first.Body)
	}
	if !bytes.Contains(first.Body, []byte(`"item":"book"`)) {
		t.Errorf("first request: body %s", first.Body)
	}
	if n := db.CountT(t, "orders"); n != 1 {
		t.Fatalf("%d orders after the first request, want 1", n)
	}

	retry := Post(t, h, "/orders", "order-1", `{"item":"book"}`)
	switch {
	case retry.Status != first.Status, !bytes.Equal(retry.Body, first.Body):
		t.Errorf("retry: %d %s, want %d %s", retry.Status, retry.Body, first.Status, first.Body)
	case retry.Header.Get(idemhttp.ReplayedHeader) != "true":
		t.Errorf("retry: %s = %q, want true", idemhttp.ReplayedHeader, retry.Header.Get(idemhttp.ReplayedHeader))
	case retry.Header.Get("Content-Type") != first.Header.Get("Content-Type"):
		t.Errorf("retry: Content-Type %q, want %q", retry.Header.Get("Content-Type"), first.Header.Get("Content-Type"))
	case retry.Header.Get("Location") != first.Header.Get("Location") || first.Header.Get("Location") == "":
		t.Errorf("retry: Location %q, want %q", retry.Header.Get("Location"), first.Header.Get("Location"))
	}

	other := Post(t, h, "/orders", "order-1", `{"item":"pen"}`)
	if other.Status != http.StatusUnprocessableEntity || other.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("another body under the same key: %d %q, want 422 problem", other.Status, other.Header.Get("Content-Type"))
	}
	if n := db.CountT(t, "orders"); n != 1 {
		t.Errorf("%d orders after the retries, want 1", n)
	}

	if r := Post(t, h, "/orders", "", `{"item":"book"}`); r.Status != http.StatusBadRequest {
		t.Errorf("no key: %d, want 400 (the key is required)", r.Status)
	}
}
