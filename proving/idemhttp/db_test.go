package idemhttp_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/proving/dbtest"
)

// sqliteParams are the connection settings the SQLite dialect asks for. The
// busy timeout, 10 s, is how long a transaction waits at BEGIN for the write
// lock: a request that holds it on purpose (TestInFlight) lets go within
// 300 ms, and the load test gives SQLite one connection, so that requests
// queue in database/sql and never wait here.
const sqliteParams = "_txlock=immediate&_pragma=busy_timeout(10000)"

// target is one database and driver the middleware runs against.
type target = dbtest.Target

// targets lists SQLite, with sqliteParams, and the servers whose variables
// are set.
func targets() []target {
	return append([]target{dbtest.SQLite(sqliteParams)}, dbtest.ServerTargets()...)
}

// forEach runs f against every target as a subtest, and shows each server
// it cannot reach as a skipped subtest that says how to reach it.
func forEach(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	dbtest.ForEach(t, targets(), f)
}

// forEachRunTarget is forEach with TiDB in its pessimistic mode after the
// other targets, for the tests of multi-step requests, which hold on every
// database.
func forEachRunTarget(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	dbtest.ForEach(t, append(targets(), dbtest.TiDBRunTargets()...), f)
	dbtest.SkipMissingTiDB(t)
}

// env is one test's database, store, effect table and handler, all dropped
// at the end.
type env struct {
	*dbtest.Env

	// What the orders handler answers, and how often it ran.
	status atomic.Int64
	runs   atomic.Int64
	// sawTx is whether the handler's last run had a transaction.
	sawTx atomic.Bool
}

// setup opens tg, makes a store on a table of its own with opts, migrates
// it, and creates an effect table.
func setup(t *testing.T, tg target, opts ...idem.Option) *env {
	t.Helper()
	e := &env{Env: tg.Setup(t, opts...)}
	e.status.Store(http.StatusCreated)
	return e
}

// insert writes an effect row with note in tx. The tests count the effect
// rows of every key, or group them by note: the key is left empty.
func (e *env) insert(ctx context.Context, tx *sql.Tx, note string) error {
	return e.Effects.Insert(ctx, tx, "", note)
}

// orders is the handler of the tests. It writes an effect row in the
// request's transaction, when there is one, and answers e.status with a body
// that numbers the run and echoes the request body, and with headers that
// are and are not on the default allow-list.
func (e *env) orders() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		tx := idemhttp.Tx(r.Context())
		e.sawTx.Store(tx != nil)
		if tx != nil {
			if err := e.insert(r.Context(), tx, fmt.Sprintf("%q", body)); err != nil { // quoted: PostgreSQL's text holds no NUL
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		n := e.runs.Add(1)
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Location", fmt.Sprintf("/orders/%d", n))
		h.Set("Etag", fmt.Sprintf(`"v%d"`, n))
		h.Set("Set-Cookie", fmt.Sprintf("session=s%d; HttpOnly", n))
		h.Set("X-Run", fmt.Sprint(n))
		w.WriteHeader(int(e.status.Load()))
		fmt.Fprintf(w, "{\"order\":%d,\"got\":%q}\n\x00\xff", n, body)
	})
}

// protect returns the middleware of e's store with opts, which must be
// valid, and global keys (WithSingleClient), as most tests need no scope.
func (e *env) protect(t *testing.T, opts ...idemhttp.Option) func(http.Handler) http.Handler {
	t.Helper()
	return mustNew(t, e.Store, e.DB, append([]idemhttp.Option{idemhttp.WithSingleClient()}, opts...)...).Handler
}

// protectScoped is protect with scope instead of global keys.
func (e *env) protectScoped(t *testing.T, scope func(*http.Request) (string, error), opts ...idemhttp.Option) func(http.Handler) http.Handler {
	t.Helper()
	return mustNew(t, e.Store, e.DB, append([]idemhttp.Option{idemhttp.WithScope(scope)}, opts...)...).Handler
}

// mustNew is idemhttp.New for options that must be valid.
func mustNew(t testing.TB, store *idem.Store, db *sql.DB, opts ...idemhttp.Option) *idemhttp.Middleware {
	t.Helper()
	mw, err := idemhttp.New(store, db, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// serve starts a test server with the middleware around handler.
func (e *env) serve(t *testing.T, handler http.Handler, opts ...idemhttp.Option) *httptest.Server {
	t.Helper()
	return start(t, e.protect(t, opts...)(handler))
}

func start(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// lookup returns the record of the client's key, as Store.Lookup does.
func (e *env) lookup(t *testing.T, scope, key string) (idem.Result, error) {
	t.Helper()
	return e.Store.Lookup(context.Background(), e.DB, idemhttp.StoredKey(scope, key))
}

// wantNoRecord fails the test if the key has a record.
func (e *env) wantNoRecord(t *testing.T, scope, key string) {
	t.Helper()
	if res, err := e.lookup(t, scope, key); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup = %v, %v; want ErrNotFound: nothing must be stored", res.Outcome, err)
	}
}

// reply is a response as the client received it.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// client sends each request on a connection of its own: net/http's
// Transport resends a request that carries an Idempotency-Key when a reused
// connection fails, which would hide a lost response from the tests. It
// honours Expect: 100-continue, which the tests of oversized bodies send:
// it holds the body back until the server asks for it or answers, for up to
// 5 s. The middleware refuses an oversized body from its Content-Length
// alone, in milliseconds even on a loaded machine; only a server silent for
// 5 s would get the body sent anyway.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: 5 * time.Second}}

// send sends a request with the key (none if key is empty) and body.
func send(t *testing.T, srv *httptest.Server, method, path, key, body string) reply {
	t.Helper()
	h := http.Header{}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	return sendHeader(t, srv, method, path, h, strings.NewReader(body))
}

func sendHeader(t *testing.T, srv *httptest.Server, method, path string, h http.Header, body io.Reader) reply {
	t.Helper()
	rep, err := trySend(srv, method, path, h, body)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// trySend is sendHeader for goroutines other than the test's.
func trySend(srv *httptest.Server, method, path string, h http.Header, body io.Reader) (reply, error) {
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		return reply{}, err
	}
	for name, values := range h {
		req.Header[name] = values
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{resp.StatusCode, resp.Header, b}, nil
}

// keyHeader is a request header with the key.
func keyHeader(key string) http.Header { return http.Header{"Idempotency-Key": {key}} }

// serveDirect runs h on req without a network in between, for requests a
// client would refuse to send and for panics that must reach the test.
func serveDirect(h http.Handler, req *http.Request) reply {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	resp := rec.Result()
	body, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, body}
}

// wantRan fails the test unless rep is a response of the handler's run n,
// not a replay.
func wantRan(t *testing.T, rep reply, status, n int) {
	t.Helper()
	if rep.status != status || rep.header.Get("X-Run") != fmt.Sprint(n) || rep.header.Get(idemhttp.ReplayedHeader) != "" {
		t.Fatalf("got %d, X-Run %q, %s %q; want %d from run %d, not replayed (body %q)",
			rep.status, rep.header.Get("X-Run"), idemhttp.ReplayedHeader, rep.header.Get(idemhttp.ReplayedHeader), status, n, rep.body)
	}
}

// wantReplay fails the test unless rep replays first: its status and body
// byte for byte, its allow-listed headers, and the replay header.
func wantReplay(t *testing.T, rep, first reply) {
	t.Helper()
	if rep.status != first.status || !bytes.Equal(rep.body, first.body) {
		t.Fatalf("replay = %d %q, want %d %q", rep.status, rep.body, first.status, first.body)
	}
	if got := rep.header.Get(idemhttp.ReplayedHeader); got != "true" {
		t.Errorf("%s = %q, want true", idemhttp.ReplayedHeader, got)
	}
	for _, name := range []string{"Content-Type", "Location", "Etag"} {
		if got, want := rep.header.Values(name), first.header.Values(name); !equal(got, want) {
			t.Errorf("replayed %s = %q, want %q", name, got, want)
		}
	}
	for _, name := range []string{"Set-Cookie", "X-Run"} {
		if got := rep.header.Values(name); len(got) != 0 {
			t.Errorf("replayed %s = %q: it is not on the allow-list", name, got)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

const problemTypes = "https://github.com/idemgo/idem/blob/main/docs/http.md#"

// wantProblem fails the test unless rep is the middleware's problem kind
// with status, and Retry-After is retryAfter ("" for none).
func wantProblem(t *testing.T, rep reply, status int, kind, retryAfter string) {
	t.Helper()
	if rep.status != status {
		t.Fatalf("status = %d, want %d (body %q)", rep.status, status, rep.body)
	}
	if ct := rep.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	if got := rep.header.Get("Retry-After"); got != retryAfter {
		t.Errorf("Retry-After = %q, want %q", got, retryAfter)
	}
	if rep.header.Get(idemhttp.ReplayedHeader) != "" || rep.header.Get("X-Run") != "" {
		t.Errorf("a problem carries a header of the handler's response: %v", rep.header)
	}
	var p struct {
		Type, Title, Detail string
		Status              int
	}
	dec := json.NewDecoder(bytes.NewReader(rep.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem body %q: %v", rep.body, err)
	}
	if p.Type != problemTypes+kind || p.Status != status || p.Title == "" || p.Detail == "" {
		t.Errorf("problem = %+v, want type %s%s and status %d", p, problemTypes, kind, status)
	}
}

// hook records the errors the middleware reports.
type hook struct {
	mu   sync.Mutex
	errs []error
}

func (h *hook) option() idemhttp.Option {
	return idemhttp.WithErrorHook(func(_ *http.Request, err error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.errs = append(h.errs, err)
	})
}

func (h *hook) reported() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...)
}
