package idemtest_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/idemtest"
)

// orderHandler is a handler behind the middleware: it writes insertSQL in
// the request's transaction and answers status with a JSON body that echoes
// the request's. runs counts its runs.
type orderHandler struct {
	status int
	runs   int
}

func (h *orderHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.runs++
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if _, err := idemhttp.Tx(r.Context()).ExecContext(r.Context(), insertSQL); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Set-Cookie", "session=1") // sent, never stored
	w.WriteHeader(h.status)
	io.WriteString(w, `{"got":`+string(body)+`}`)
}

// orderRequest is the request of the tests: a POST /orders with a key, an
// account and a body.
func orderRequest() *http.Request {
	r := httptest.NewRequest("POST", "/orders?express=1", strings.NewReader(`{"item":88}`))
	r.Header.Set("Idempotency-Key", "order-1")
	r.Header.Set("X-Account", "acme")
	return r
}

func account(r *http.Request) (string, error) { return r.Header.Get("X-Account"), nil }

// TestExpectRequest runs the middleware over sqlmock on every dialect, with
// the expectations of ExpectRequest for each outcome, and checks what the
// client gets, the statements sent, in order, and that every expectation
// was met. That the claim matches at all shows that ExpectRequest's key and
// hash are the middleware's.
func TestExpectRequest(t *testing.T) {
	type env struct {
		dc  dialectCase
		x   *mocked
		mw  *idemhttp.Middleware
		req *http.Request
		h   *orderHandler
	}
	stored := idem.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"got":{"item":88}}`)}
	for _, c := range []struct {
		name string
		only func(dc dialectCase) bool
		// status is what the handler answers.
		status int
		expect func(t *testing.T, e env)
		// The client's response: status, body, and whether it is a
		// replay; runs is how often the handler ran.
		wantStatus   int
		wantBody     string
		wantReplayed bool
		runs         int
		statements   func(e env) []string
	}{
		{
			name: "claimed", status: 201,
			expect: func(t *testing.T, e env) {
				e.x.mock.ExpectBegin()
				claim := expectRequest(t, e.x.m, e.mw, e.req)
				e.x.mock.ExpectExec(e.x.insert).WillReturnResult(sqlmock.NewResult(1, 1))
				e.x.m.ExpectCompleteAny(claim.Key())
				e.x.mock.ExpectCommit()
			},
			wantStatus: 201, wantBody: `{"got":{"item":88}}`, runs: 1,
			statements: func(e env) []string { return joined(e.dc.claim, []string{"other", "Complete"}) },
		},
		{
			name: "a 5xx stores nothing", status: 502,
			expect: func(t *testing.T, e env) {
				e.x.mock.ExpectBegin()
				expectRequest(t, e.x.m, e.mw, e.req)
				e.x.mock.ExpectExec(e.x.insert).WillReturnResult(sqlmock.NewResult(1, 1))
				e.x.mock.ExpectRollback()
			},
			wantStatus: 502, wantBody: `{"got":{"item":88}}`, runs: 1,
			statements: func(e env) []string { return joined(e.dc.claim, []string{"other"}) },
		},
		{
			name: "WillReplay", status: 201,
			expect: func(t *testing.T, e env) {
				e.x.mock.ExpectBegin()
				expectRequest(t, e.x.m, e.mw, e.req).WillReplay(stored)
				e.x.mock.ExpectRollback()
			},
			wantStatus: 201, wantBody: `{"got":{"item":88}}`, wantReplayed: true,
			statements: func(e env) []string { return e.dc.claim },
		},
		{
			name: "WillMismatch", status: 201,
			expect: func(t *testing.T, e env) {
				e.x.mock.ExpectBegin()
				expectRequest(t, e.x.m, e.mw, e.req).WillMismatch()
				e.x.mock.ExpectRollback()
			},
			wantStatus: 422,
			statements: func(e env) []string { return e.dc.claim },
		},
		{
			name: "WillBeInFlight", status: 201,
			expect: func(t *testing.T, e env) {
				e.x.mock.ExpectBegin()
				expectRequest(t, e.x.m, e.mw, e.req).WillBeInFlight()
				e.x.mock.ExpectRollback()
			},
			wantStatus: 409,
			statements: func(e env) []string { return e.dc.claim },
		},
		{
			name: "WillConflict, then claimed", status: 201,
			only: func(dc dialectCase) bool { return dc.conflict },
			expect: func(t *testing.T, e env) {
				e.x.mock.ExpectBegin()
				expectRequest(t, e.x.m, e.mw, e.req).WillConflict()
				e.x.mock.ExpectRollback()
				e.x.mock.ExpectBegin()
				claim := expectRequest(t, e.x.m, e.mw, e.req)
				e.x.mock.ExpectExec(e.x.insert).WillReturnResult(sqlmock.NewResult(1, 1))
				e.x.m.ExpectCompleteAny(claim.Key())
				e.x.mock.ExpectCommit()
			},
			wantStatus: 201, wantBody: `{"got":{"item":88}}`, runs: 1,
			statements: func(e env) []string { return joined(e.dc.claim, e.dc.claim, []string{"other", "Complete"}) },
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, dc := range dialectCases() {
				if c.only != nil && !c.only(dc) {
					continue
				}
				t.Run(dc.name, func(t *testing.T) {
					store, err := idem.New(dc.d)
					if err != nil {
						t.Fatal(err)
					}
					for _, equal := range []bool{false, true} {
						x := newMocked(t, store, equal)
						mw, err := idemhttp.New(store, x.db, nil, idemhttp.WithScope(account))
						if err != nil {
							t.Fatal(err)
						}
						e := env{dc: dc, x: x, mw: mw, req: orderRequest(), h: &orderHandler{status: c.status}}
						c.expect(t, e)
						rec := httptest.NewRecorder()
						mw.Handler(e.h).ServeHTTP(rec, e.req)

						replayed := rec.Header().Get(idemhttp.ReplayedHeader) == "true"
						if rec.Code != c.wantStatus || replayed != c.wantReplayed || (c.wantBody != "" && rec.Body.String() != c.wantBody) {
							t.Errorf("matcher equal %v: got %d %q, replayed %v; want %d %q, replayed %v",
								equal, rec.Code, rec.Body, replayed, c.wantStatus, c.wantBody, c.wantReplayed)
						}
						if e.h.runs != c.runs {
							t.Errorf("matcher equal %v: the handler ran %d times, want %d", equal, e.h.runs, c.runs)
						}
						if want, got := c.statements(e), x.statements(); !reflect.DeepEqual(got, want) {
							t.Errorf("matcher equal %v: the middleware sent %v, want %v", equal, got, want)
						}
						if err := x.mock.ExpectationsWereMet(); err != nil {
							t.Errorf("matcher equal %v: %v", equal, err)
						}
					}
				})
			}
		})
	}
}

func expectRequest(t *testing.T, m *idemtest.Mock, mw *idemhttp.Middleware, r *http.Request) *idemtest.ExpectedDo {
	t.Helper()
	claim, err := m.ExpectRequest(mw, r)
	if err != nil {
		t.Fatal(err)
	}
	return claim
}

// TestExpectRequestKey checks that the claim's key is the stored key of the
// request's scope and key, as an operator would look it up.
func TestExpectRequestKey(t *testing.T) {
	store, err := idem.New(idem.Postgres())
	if err != nil {
		t.Fatal(err)
	}
	x := newMocked(t, store, false)
	mw, err := idemhttp.New(store, x.db, nil, idemhttp.WithScope(account))
	if err != nil {
		t.Fatal(err)
	}
	claim := expectRequest(t, x.m, mw, orderRequest())
	if got, want := claim.Key(), idemhttp.StoredKey("acme", "order-1"); got != want {
		t.Errorf("Key() = %q, want %q", got, want)
	}
	if got := x.m.ExpectDo("plain", hash).Key(); got != "plain" {
		t.Errorf("ExpectDo(plain).Key() = %q", got)
	}
}

// TestExpectRequestRefuses checks that a request the middleware claims no
// key for is an error of ExpectRequest, which then expects nothing.
func TestExpectRequestRefuses(t *testing.T) {
	store, err := idem.New(idem.Postgres())
	if err != nil {
		t.Fatal(err)
	}
	x := newMocked(t, store, false)
	mw, err := idemhttp.New(store, x.db, nil, idemhttp.WithScope(account))
	if err != nil {
		t.Fatal(err)
	}
	get := orderRequest()
	get.Method = "GET"
	noKey := orderRequest()
	noKey.Header.Del("Idempotency-Key")
	errNoAccount := errors.New("no account")
	scoped, err := idemhttp.New(store, x.db, nil, idemhttp.WithScope(func(*http.Request) (string, error) { return "", errNoAccount }))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		mw   *idemhttp.Middleware
		req  *http.Request
		want string
		is   error
	}{
		{"an unprotected method", mw, get, "method GET is not protected", nil},
		{"no key", mw, noKey, "no Idempotency-Key header", nil},
		{"a failed scope", scoped, orderRequest(), "no account", errNoAccount},
		{"a nil Middleware", nil, orderRequest(), "nil Middleware", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			claim, err := x.m.ExpectRequest(c.mw, c.req)
			if claim != nil || err == nil || !strings.HasPrefix(err.Error(), "idemtest: ExpectRequest: idemhttp: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ExpectRequest = %v, %v; want no claim and an error that says %q", claim, err, c.want)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("ExpectRequest: %v does not wrap %v", err, c.is)
			}
		})
	}
	if err := x.mock.ExpectationsWereMet(); err != nil {
		t.Errorf("ExpectRequest expected something after an error: %v", err)
	}
}

// TestExpectRequestLookupFirst shows the expectations for a store of
// LookupAlways: its read comes before the BEGIN, with the key and hash of
// Identify.
func TestExpectRequestLookupFirst(t *testing.T) {
	store, err := idem.New(idem.Postgres(), idem.WithLookupFirst(idem.LookupAlways))
	if err != nil {
		t.Fatal(err)
	}
	x := newMocked(t, store, false)
	mw, err := idemhttp.New(store, x.db, nil, idemhttp.WithScope(account))
	if err != nil {
		t.Fatal(err)
	}
	h := &orderHandler{status: 201}

	// The read finds nothing; the claim follows.
	req := orderRequest()
	key, reqHash, err := mw.Identify(req)
	if err != nil {
		t.Fatal(err)
	}
	x.m.ExpectLookupFirst(key, reqHash)
	x.mock.ExpectBegin()
	claim := expectRequest(t, x.m, mw, req)
	x.mock.ExpectExec(x.insert).WillReturnResult(sqlmock.NewResult(1, 1))
	x.m.ExpectCompleteAny(claim.Key())
	x.mock.ExpectCommit()
	rec := httptest.NewRecorder()
	mw.Handler(h).ServeHTTP(rec, req)
	if rec.Code != 201 || h.runs != 1 {
		t.Errorf("first: %d after %d runs, want 201 after 1", rec.Code, h.runs)
	}

	// The read finds the finished request: no transaction at all.
	req = orderRequest()
	x.m.ExpectLookupFirst(key, reqHash).WillReplay(idem.Response{Status: 201, Body: []byte("stored")})
	rec = httptest.NewRecorder()
	mw.Handler(h).ServeHTTP(rec, req)
	if rec.Code != 201 || rec.Body.String() != "stored" || rec.Header().Get(idemhttp.ReplayedHeader) != "true" || h.runs != 1 {
		t.Errorf("retry: %d %q after %d runs, want the stored 201 replayed", rec.Code, rec.Body, h.runs)
	}
	if err := x.mock.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}
