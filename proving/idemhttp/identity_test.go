package idemhttp_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/checkout"
	"github.com/idemgo/idem/proving/dbtest"
)

// accountHeader names the client of a request in the tests of scopes, as
// a service's authentication would.
const accountHeader = "X-Account"

// byAccount is the scope function of those tests.
func byAccount(r *http.Request) (string, error) { return r.Header.Get(accountHeader), nil }

// sendFor sends a POST to path with key as account ("" for none).
func sendFor(t *testing.T, srv *httptest.Server, path, account, key string) reply {
	t.Helper()
	h := keyHeader(key)
	if account != "" {
		h.Set(accountHeader, account)
	}
	return sendHeader(t, srv, http.MethodPost, path, h, nil)
}

// seen keeps the idem.Identity that each piece of a request's work found
// in its context, and the scope of each Event of the Store, in order.
type seen struct {
	mu     sync.Mutex
	ids    map[string]idem.Identity
	scopes []string
}

func (s *seen) note(ctx context.Context, who string) {
	id, ok := idem.IdentityFrom(ctx)
	if !ok {
		id.Key = "none in the context"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[who] = id
}

func (s *seen) observe(_ context.Context, e idem.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scopes = append(s.scopes, e.Scope)
}

// want checks that each of who saw the identity of a request of the
// middleware with scope and the client's key, and takes the events' scopes.
func (s *seen) want(t *testing.T, scope, key string, who ...string) (eventScopes []string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range who {
		got, ok := s.ids[w]
		if !ok || got.Key != idemhttp.StoredKey(scope, key) || got.Scope != scope || got.Shard != nil {
			t.Errorf("%s saw %+v (ran: %v); want key %q, scope %q, no shard value", w, got, ok, idemhttp.StoredKey(scope, key), scope)
		}
	}
	eventScopes, s.scopes = s.scopes, nil
	return eventScopes
}

// TestIdentityBehindTheMiddleware shows that the handler behind Handler,
// and the Phase, Call and Final steps of Steps, find their request's
// idem.Identity in their context, on every database, through database/sql
// and a pgx pool: the stored key, which is Identify's, and the scope that
// WithScope's function gave, empty with WithSingleClient. The Store's
// Events carry the same scope. No step needs Identify, which reads the
// body again, to know its request.
func TestIdentityBehindTheMiddleware(t *testing.T) {
	forEachRunTarget(t, func(t *testing.T, tg target) {
		for _, via := range checkout.Ways(tg) {
			t.Run(via, func(t *testing.T) {
				s := &seen{ids: map[string]idem.Identity{}}
				e := setup(t, tg, idem.WithObserver(s.observe))
				for _, c := range []struct {
					name, account string
					opt           idemhttp.Option
				}{
					{"scoped", "acct_42", idemhttp.WithScope(byAccount)},
					{"single client", "", idemhttp.WithSingleClient()},
				} {
					mux := http.NewServeMux()
					handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						s.note(r.Context(), c.name+" handler")
						w.WriteHeader(http.StatusCreated)
					})
					if via == checkout.ViaPgxPool {
						mw := pgxMiddleware(t, e.Store, e.DSN, c.opt)
						mux.Handle("POST /orders", mw.Handler(handler))
						mux.Handle("POST /checkout", mw.Steps(noteSteps[pgx.Tx](s, c.name)))
					} else {
						mw := mustNew(t, e.Store, e.DB, c.opt)
						mux.Handle("POST /orders", mw.Handler(handler))
						mux.Handle("POST /checkout", mw.Steps(noteSteps[*sql.Tx](s, c.name)))
					}
					srv := start(t, mux)
					if rep := sendFor(t, srv, "/orders", c.account, "5b0c"); rep.status != http.StatusCreated {
						t.Fatalf("%s: %v, want 201", c.name, rep)
					}
					if rep := sendFor(t, srv, "/checkout", c.account, "7d2e"); rep.status != http.StatusCreated {
						t.Fatalf("%s: %v, want 201", c.name, rep)
					}
					got := s.want(t, c.account, "5b0c", c.name+" handler")
					got = append(got, s.want(t, c.account, "7d2e", c.name+" order", c.name+" charge", c.name+" confirm")...)
					if len(got) != 2 || got[0] != c.account || got[1] != c.account {
						t.Errorf("%s: the events' scopes are %q, want the request's, %q, twice", c.name, got, c.account)
					}
				}
			})
		}
	})
}

// pgxMiddleware is idempgx.NewMiddleware on a pool of dsn.
func pgxMiddleware(t *testing.T, store *idem.Store, dsn string, opts ...idemhttp.Option) *idemhttp.Middleware {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	mw, err := idempgx.NewMiddleware(store, pool, pgx.TxOptions{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// noteSteps builds the steps of a request whose pieces each note what
// they saw, under their names after prefix.
func noteSteps[TX any](s *seen, prefix string) func(*http.Request) ([]idem.Step, error) {
	return func(*http.Request) ([]idem.Step, error) {
		return []idem.Step{
			idem.Phase("order", func(ctx context.Context, _ TX) error { s.note(ctx, prefix+" order"); return nil }),
			idem.Call("charge", func(ctx context.Context, _ string) error { s.note(ctx, prefix+" charge"); return nil }),
			idem.Final("confirm", func(ctx context.Context, _ TX) (idem.Response, error) {
				s.note(ctx, prefix+" confirm")
				return idem.Response{Status: http.StatusCreated}, nil
			}),
		}, nil
	}
}

// TestTenantsShareAClientKey shows, on every database, why a service keys
// its own rows by the request's idem.Identity and not by the client's raw
// Idempotency-Key: two API clients (scopes) send one key, and the
// checkout's orders table has a unique column for the request. Keyed by
// the raw header, the second client's order collides with the first's,
// and it gets 503 unfinished on every retry; keyed by the stored key of
// the Identity, as the examples and docs do, each client's order is its
// own, and each retry replays its own answer.
func TestTenantsShareAClientKey(t *testing.T) {
	forEachRunTarget(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		ph := tg.Dialect.Placeholder
		orders := "orders_" + dbtest.RandomName()
		if _, err := e.DB.Exec("CREATE TABLE " + orders + " (request VARCHAR(320) NOT NULL UNIQUE, item VARCHAR(64) NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := e.DB.Exec("DROP TABLE " + orders); err != nil {
				t.Errorf("drop %s: %v", orders, err)
			}
		})
		mw := mustNew(t, e.Store, e.DB, idemhttp.WithScope(byAccount))
		checkoutBy := func(request func(ctx context.Context, r *http.Request) string) http.Handler {
			return mw.Steps(func(r *http.Request) ([]idem.Step, error) {
				return []idem.Step{
					idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error {
						_, err := tx.ExecContext(ctx, "INSERT INTO "+orders+" (request, item) VALUES ("+ph(1)+", 'book')", request(ctx, r))
						return err
					}),
					idem.Final("confirm", func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
						var item string
						err := tx.QueryRowContext(ctx, "SELECT item FROM "+orders+" WHERE request = "+ph(1), request(ctx, r)).Scan(&item)
						return idem.Response{Status: http.StatusCreated, Body: []byte(item)}, err
					}),
				}, nil
			})
		}
		mux := http.NewServeMux()
		mux.Handle("POST /raw", checkoutBy(func(_ context.Context, r *http.Request) string { return r.Header.Get("Idempotency-Key") }))
		mux.Handle("POST /identity", checkoutBy(func(ctx context.Context, _ *http.Request) string {
			id, _ := idem.IdentityFrom(ctx)
			return id.Key
		}))
		srv := start(t, mux)

		// Keyed by the raw header: the second client collides.
		if rep := sendFor(t, srv, "/raw", "acct_a", "5b0c"); rep.status != http.StatusCreated {
			t.Fatalf("the first client: %v, want 201", rep)
		}
		for range 2 {
			wantProblem(t, sendFor(t, srv, "/raw", "acct_b", "5b0c"), http.StatusServiceUnavailable, "unfinished", "1")
		}

		// Keyed by the Identity: both clients' orders are placed.
		for _, account := range []string{"acct_c", "acct_d"} {
			first := sendFor(t, srv, "/identity", account, "7d2e")
			if first.status != http.StatusCreated || string(first.body) != "book" {
				t.Fatalf("%s: %v, want 201 book", account, first)
			}
			wantReplay(t, sendFor(t, srv, "/identity", account, "7d2e"), first)
		}
		var n int
		if err := e.DB.QueryRow("SELECT count(*) FROM " + orders).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 3 {
			t.Errorf("%d orders, want 3: one of the raw key, and one per client of the Identity", n)
		}
	})
}
