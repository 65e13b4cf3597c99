package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

const testOrigin = "http://127.0.0.1:8081"

// TestPreflight sends the preflight that a browser sends before the page's
// POST: the CORS middleware answers it, allowing the page's origin, POST
// and the two headers the page sends, and nothing reaches the database.
// The preflights of another origin, or of a request with another header,
// get no permission, and the browser then sends nothing.
func TestPreflight(t *testing.T) {
	db := testDB(t)
	api := testAPI(t, db)
	for _, tc := range []struct {
		name, origin, headers string
		allowed               bool
	}{
		{"the page", testOrigin, "content-type,idempotency-key", true},
		{"the page, with the key alone", testOrigin, "idempotency-key", true},
		{"another origin", "http://127.0.0.1:9999", "content-type,idempotency-key", false},
		{"another header", testOrigin, "content-type,idempotency-key,x-secret", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, preflight(tc.origin, tc.headers))
			h := rec.Result().Header
			if rec.Code != http.StatusNoContent {
				t.Errorf("status %d, want 204", rec.Code)
			}
			if !tc.allowed {
				if v := h.Get("Access-Control-Allow-Origin"); v != "" {
					t.Errorf("Access-Control-Allow-Origin: %q, want none", v)
				}
				return
			}
			if v := h.Get("Access-Control-Allow-Origin"); v != tc.origin {
				t.Errorf("Access-Control-Allow-Origin: %q, want %q", v, tc.origin)
			}
			if m := headerList(h, "Access-Control-Allow-Methods"); !slices.Contains(m, "post") {
				t.Errorf("Access-Control-Allow-Methods: %q, want POST", m)
			}
			allowed := headerList(h, "Access-Control-Allow-Headers")
			for asked := range strings.SplitSeq(tc.headers, ",") {
				if !slices.Contains(allowed, asked) {
					t.Errorf("Access-Control-Allow-Headers: %q, want %q among them", allowed, asked)
				}
			}
			if v := h.Get("Access-Control-Max-Age"); v != "600" {
				t.Errorf("Access-Control-Max-Age: %q, want 600", v)
			}
		})
	}
	if n := count(t, db, "idempotency_keys"); n != 0 {
		t.Errorf("%d keys stored by preflights, want 0", n)
	}
}

// TestIdemhttpPassesPreflightsThrough serves preflights with idemhttp's
// middleware itself, as it would see them behind a CORS middleware that
// passes them on: OPTIONS is not a protected method, so the handler behind
// runs each time, without a transaction, and its answer goes out as it
// wrote it, even when the request carries a key (browsers send none on a
// preflight; another client may). Nothing is stored.
func TestIdemhttpPassesPreflightsThrough(t *testing.T) {
	db := testDB(t)
	store := testStore(t)
	if err := store.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.New(store, db, nil, idemhttp.WithSingleClient(), idemhttp.WithKeyRequired())
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		if tx := idemhttp.Tx(r.Context()); tx != nil {
			t.Errorf("%s got a transaction", r.Method)
		}
		w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		w.Header().Set("X-Run", "yes")
		w.WriteHeader(http.StatusNoContent)
	}))
	for i, key := range []string{"", "a-key", "a-key"} {
		req := preflight(testOrigin, "content-type,idempotency-key")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		got := rec.Result().Header
		if rec.Code != http.StatusNoContent || got.Get("Access-Control-Allow-Origin") != testOrigin || got.Get("X-Run") != "yes" ||
			got.Get("Idempotent-Replayed") != "" || rec.Body.Len() != 0 {
			t.Errorf("preflight %d (key %q): %d %v %q, want the handler's 204 as it wrote it", i+1, key, rec.Code, got, rec.Body)
		}
		if runs != i+1 {
			t.Errorf("preflight %d: the handler ran %d times, want %d", i+1, runs, i+1)
		}
	}
	if n := count(t, db, "idempotency_keys"); n != 0 {
		t.Errorf("%d keys stored by preflights, want 0", n)
	}
}

// TestExposedHeaders checks that every answer to the page's origin, the
// first one, its replay and idemhttp's problems, carries the CORS headers
// that let the page read it, and exposes Idempotent-Replayed and
// Retry-After, which a browser otherwise hides from the page.
func TestExposedHeaders(t *testing.T) {
	db := testDB(t)
	api := testAPI(t, db)
	post := func(key, body string) *http.Response {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
		req.Header.Set("Origin", testOrigin)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		return rec.Result()
	}
	const body = `{"payee":"Ada","amount_cents":1250}`
	first := post("key-1", body)
	replay := post("key-1", body)
	reused := post("key-1", `{"payee":"Ada","amount_cents":9999}`)
	for _, tc := range []struct {
		name     string
		resp     *http.Response
		status   int
		replayed string
	}{
		{"the first answer", first, http.StatusCreated, ""},
		{"its replay", replay, http.StatusCreated, "true"},
		{"a key reused", reused, http.StatusUnprocessableEntity, ""},
	} {
		if tc.resp.StatusCode != tc.status || tc.resp.Header.Get("Idempotent-Replayed") != tc.replayed {
			t.Errorf("%s: %d, Idempotent-Replayed %q; want %d, %q", tc.name, tc.resp.StatusCode, tc.resp.Header.Get("Idempotent-Replayed"), tc.status, tc.replayed)
		}
		checkReadable(t, tc.name, tc.resp)
	}
	if n := count(t, db, "payments"); n != 1 {
		t.Errorf("%d payments, want 1", n)
	}

	// An in-flight answer, which the page waits out with its Retry-After:
	// idemhttp on a Runner that finds the key held, behind the same CORS.
	mw, err := idemhttp.NewWithRunner(testStore(t), heldRunner{}, idemhttp.WithSingleClient(), idemhttp.WithRetryAfter(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	busy := withCORS(testOrigin, mw.Handler(http.HandlerFunc(pay)))
	req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
	req.Header.Set("Origin", testOrigin)
	req.Header.Set("Idempotency-Key", "key-2")
	rec := httptest.NewRecorder()
	busy.ServeHTTP(rec, req)
	resp := rec.Result()
	var p struct{ Type string }
	_ = json.NewDecoder(resp.Body).Decode(&p)
	if resp.StatusCode != http.StatusConflict || p.Type != idemhttp.DefaultProblemTypeBase+"in-flight" || resp.Header.Get("Retry-After") != "2" {
		t.Errorf("in flight: %d, type %q, Retry-After %q; want 409, in-flight, 2", resp.StatusCode, p.Type, resp.Header.Get("Retry-After"))
	}
	checkReadable(t, "in flight", resp)
}

// checkReadable fails the test unless the browser would hand resp to the
// page of testOrigin with its Idempotent-Replayed and Retry-After.
func checkReadable(t *testing.T, name string, resp *http.Response) {
	t.Helper()
	if v := resp.Header.Get("Access-Control-Allow-Origin"); v != testOrigin {
		t.Errorf("%s: Access-Control-Allow-Origin %q, want %q", name, v, testOrigin)
	}
	if exposed := headerList(resp.Header, "Access-Control-Expose-Headers"); !slices.Contains(exposed, "idempotent-replayed") || !slices.Contains(exposed, "retry-after") {
		t.Errorf("%s: Access-Control-Expose-Headers %q, want Idempotent-Replayed and Retry-After", name, exposed)
	}
}

// heldRunner answers every request as idem does when another request
// holds its key.
type heldRunner struct{}

func (heldRunner) DoTx(context.Context, string, []byte, func(context.Context) (idem.Response, error)) (idem.Result, error) {
	return idem.Result{Outcome: idem.InFlight}, nil
}

func (heldRunner) Run(context.Context, string, []byte, []idem.Step) (idem.Result, error) {
	return idem.Result{Outcome: idem.InFlight}, nil
}

// preflight is the request a browser sends before the page's POST.
func preflight(origin, headers string) *http.Request {
	req := httptest.NewRequest(http.MethodOptions, "/payments", nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", http.MethodPost)
	req.Header.Set("Access-Control-Request-Headers", headers)
	return req
}

// headerList returns the comma-separated values of h's name, lower case.
func headerList(h http.Header, name string) []string {
	var list []string
	for _, v := range h.Values(name) {
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.ToLower(strings.TrimSpace(item)); item != "" {
				list = append(list, item)
			}
		}
	}
	return list
}

func testDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := openDB(filepath.Join(t.TempDir(), "payments.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func testStore(t *testing.T) *idem.Store {
	t.Helper()
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func testAPI(t *testing.T, db *sql.DB) http.Handler {
	t.Helper()
	api, err := newAPI(context.Background(), db, testOrigin)
	if err != nil {
		t.Fatal(err)
	}
	return api
}

func count(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCORSBehindIdemhttpHidesReplays puts the same CORS middleware behind
// idemhttp's, the order that docs/http.md warns against: the first answer
// carries its headers, since the handler behind runs, but the replay and
// idemhttp's problems do not, and a browser hides them from the page,
// which sees a network error where the answer to its payment was.
func TestCORSBehindIdemhttpHidesReplays(t *testing.T) {
	db := testDB(t)
	if _, err := newAPI(context.Background(), db, testOrigin); err != nil { // the tables
		t.Fatal(err)
	}
	mw, err := idemhttp.New(testStore(t), db, nil, idemhttp.WithSingleClient(), idemhttp.WithKeyRequired())
	if err != nil {
		t.Fatal(err)
	}
	wrong := mw.Handler(withCORS(testOrigin, http.HandlerFunc(pay)))
	post := func(body string) *http.Response {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
		req.Header.Set("Origin", testOrigin)
		req.Header.Set("Idempotency-Key", "key-1")
		rec := httptest.NewRecorder()
		wrong.ServeHTTP(rec, req)
		return rec.Result()
	}
	const body = `{"payee":"Ada","amount_cents":1250}`
	if first := post(body); first.StatusCode != http.StatusCreated || first.Header.Get("Access-Control-Allow-Origin") != testOrigin {
		t.Errorf("the first answer: %d, Access-Control-Allow-Origin %q; want 201, %q", first.StatusCode, first.Header.Get("Access-Control-Allow-Origin"), testOrigin)
	}
	for _, tc := range []struct {
		name   string
		resp   *http.Response
		status int
	}{
		{"the replay", post(body), http.StatusCreated},
		{"a key reused", post(`{"payee":"Ada","amount_cents":9999}`), http.StatusUnprocessableEntity},
	} {
		if tc.resp.StatusCode != tc.status || tc.resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: %d, Access-Control-Allow-Origin %q; want %d and none", tc.name, tc.resp.StatusCode, tc.resp.Header.Get("Access-Control-Allow-Origin"), tc.status)
		}
	}
}
