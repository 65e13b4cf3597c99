package idemhttp_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// httptestRequest is a POST /orders with the key (none if empty) and body.
func httptestRequest(key, body string) *http.Request {
	r := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	return r
}

// neverOpened is a database handle that is never connected: Identify needs
// no database.
func neverOpened(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+t.TempDir()+"/never-opened.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestIdentifyIsTheDocumentedHash pins the formula that docs/http.md and
// the package documentation give, so that a test that builds the hash from
// the documentation matches the middleware's.
func TestIdentifyIsTheDocumentedHash(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	db := neverOpened(t)
	tenant := func(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil }
	for _, c := range []struct {
		name  string
		opt   idemhttp.Option
		scope string
	}{
		{"scoped", idemhttp.WithScope(tenant), "acme"},
		{"single client", idemhttp.WithSingleClient(), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			mw := mustNew(t, store, db, c.opt)
			body := "book\x00\xff"
			r := httptest.NewRequest("POST", "/orders/a%2Fb?x=1&y=%20", strings.NewReader(body))
			r.Header.Set("Idempotency-Key", `"order\"1"`) // quoted: the key is order"1
			r.Header.Set("X-Tenant", "acme")
			key, hash, err := mw.Identify(r)
			if err != nil {
				t.Fatal(err)
			}
			want := idem.Fingerprint([]byte("idemhttp/1"), []byte(c.scope), []byte("POST"),
				[]byte("/orders/a%2Fb"), []byte("x=1&y=%20"), []byte(body))
			if string(hash) != string(want) {
				t.Errorf("hash %x, want %x", hash, want)
			}
			if want := idemhttp.StoredKey(c.scope, `order"1`); key != want {
				t.Errorf("key %q, want %q", key, want)
			}

			// The body is put back, so that r can be identified, or
			// served, again.
			if b, err := io.ReadAll(r.Body); err != nil || string(b) != body {
				t.Errorf("the body after Identify reads %q, %v; want %q", b, err, body)
			}
			r.Body = io.NopCloser(strings.NewReader(body))
			for i := 0; i < 2; i++ {
				if k, h, err := mw.Identify(r); err != nil || k != key || string(h) != string(hash) {
					t.Errorf("Identify again = %q %x, %v; want the same", k, h, err)
				}
			}
		})
	}
}

// TestIdentifyRefuses checks the errors of Identify for the requests the
// middleware claims no key for, and that each leaves the body readable from
// the start.
func TestIdentifyRefuses(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	errNoTenant := errors.New("no tenant")
	errBroken := errors.New("connection reset")
	tenant := func(r *http.Request) (string, error) {
		switch v := r.Header.Get("X-Tenant"); v {
		case "":
			return "", errNoTenant
		case "nobody":
			return "", nil
		default:
			return v, nil
		}
	}
	mw := mustNew(t, store, neverOpened(t), idemhttp.WithScope(tenant), idemhttp.WithMaxBodyBytes(8))
	big := strings.Repeat("b", 20)
	for _, c := range []struct {
		name   string
		req    func() *http.Request
		want   string
		is     error
		body   string // what the body reads after Identify
		broken bool   // the body fails to read, so it is not compared
	}{
		{"an unprotected method", func() *http.Request {
			r := httptest.NewRequest("GET", "/orders", nil)
			r.Header.Set("Idempotency-Key", "k")
			return r
		}, "method GET is not protected", nil, "", false},
		{"no key", func() *http.Request { return httptestRequest("", "book") }, "no Idempotency-Key header", nil, "book", false},
		{"a malformed key", func() *http.Request { return httptestRequest(`"open`, "book") }, "malformed idempotency key", nil, "book", false},
		{"a failed scope", func() *http.Request { return httptestRequest("k", "book") }, "scope: no tenant", errNoTenant, "book", false},
		{"an empty scope", func() *http.Request {
			r := httptestRequest("k", "book")
			r.Header.Set("X-Tenant", "nobody")
			return r
		}, "empty scope", nil, "book", false},
		{"a body over the limit", func() *http.Request {
			r := httptestRequest("k", big)
			r.Header.Set("X-Tenant", "acme")
			return r
		}, "too large", nil, big, false},
		{"a body over the limit, without a length", func() *http.Request {
			r := httptestRequest("k", "")
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(big)), -1
			r.Header.Set("X-Tenant", "acme")
			return r
		}, "too large", nil, big, false},
		{"an unreadable body", func() *http.Request {
			r := httptestRequest("k", "")
			r.Body, r.ContentLength = io.NopCloser(iotest.ErrReader(errBroken)), -1
			r.Header.Set("X-Tenant", "acme")
			return r
		}, "read request body", errBroken, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.req()
			key, hash, err := mw.Identify(r)
			if err == nil || key != "" || hash != nil {
				t.Fatalf("Identify = %q %x, %v; want an error alone", key, hash, err)
			}
			if !strings.HasPrefix(err.Error(), "idemhttp: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Identify: %q, want it to say %q", err, c.want)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("Identify: %v does not wrap %v", err, c.is)
			}
			if c.broken {
				return
			}
			if b, err := io.ReadAll(r.Body); err != nil || string(b) != c.body {
				t.Errorf("the body after Identify reads %q, %v; want %q", b, err, c.body)
			}
		})
	}
}

// TestIdentifyMatchesTheMiddleware serves a request and then checks, on the
// database, that Identify names what the middleware stored: the stored key
// finds the record, and the hash replays it rather than mismatching.
func TestIdentifyMatchesTheMiddleware(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		tenant := func(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil }
		mw := mustNew(t, e.Store, e.DB, idemhttp.WithScope(tenant))
		req := func() *http.Request {
			r := httptest.NewRequest("PATCH", "/orders/7?express=1", strings.NewReader(`{"item":"book"}`))
			r.Header.Set("Idempotency-Key", "order-7")
			r.Header.Set("X-Tenant", "acme")
			return r
		}
		r := req()
		key, hash, err := mw.Identify(r)
		if err != nil {
			t.Fatal(err)
		}
		// The request Identify read is served as it is.
		first := serveDirect(mw.Handler(e.orders()), r)
		wantRan(t, first, http.StatusCreated, 1)
		if want := "{\"order\":1,\"got\":\"{\\\"item\\\":\\\"book\\\"}\"}\n\x00\xff"; string(first.body) != want {
			t.Errorf("the handler got %q, want %q", first.body, want)
		}

		res, err := e.Store.DoTx(context.Background(), e.DB, nil, key, hash, func(context.Context, *sql.Tx) (idem.Response, error) {
			t.Error("the key Identify named is free")
			return idem.Response{}, nil
		})
		if err != nil || res.Outcome != idem.Replay || string(res.Response.Body) != string(first.body) {
			t.Errorf("DoTx(Identify's key and hash) = %v %q, %v; want the replay of the first response", res.Outcome, res.Response.Body, err)
		}
		wantReplay(t, serveDirect(mw.Handler(e.orders()), req()), first)
	})
}
