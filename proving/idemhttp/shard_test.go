package idemhttp_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// customerHeader names the customer of a request in the shard tests, as
// a service's authentication would.
const customerHeader = "X-Customer"

// byCustomer is the middleware that a service puts in front of idemhttp's
// when its store has a shard column: it reads the customer from the
// request and puts it in the request's context with idem.WithShard, where
// the Store reads it. A request without the header goes on without a
// shard value, which is the set-up mistake the tests show refused.
func byCustomer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get(customerHeader)
		if v == "" {
			next.ServeHTTP(w, r)
			return
		}
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			http.Error(w, "bad customer", http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r.WithContext(idem.WithShard(r.Context(), id)))
	})
}

// customerOf is the customer that byCustomer put in ctx.
func customerOf(ctx context.Context) (int64, error) {
	v, ok := idem.ShardFrom(ctx)
	id, isInt := v.(int64)
	if !ok || !isInt {
		return 0, fmt.Errorf("no customer in the context (shard value %v)", v)
	}
	return id, nil
}

// sendAs sends a POST with key as customer ("" for no customer header).
func sendAs(t *testing.T, srv *httptest.Server, customer, key string) reply {
	t.Helper()
	h := keyHeader(key)
	if customer != "" {
		h.Set(customerHeader, customer)
	}
	return sendHeader(t, srv, http.MethodPost, "/orders", h, nil)
}

// wantRows fails the test unless table holds n rows, of every customer:
// idem's records or the orders.
func wantRows(t *testing.T, db *sql.DB, table string, n int) {
	t.Helper()
	var got int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM "+table).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Errorf("%s holds %d rows, want %d", table, got, n)
	}
}

// wantShardRefused fails the test unless rep is the answer to a request
// that reached the middleware without a shard value: a 500 internal-error,
// with the Store's ErrInvalidArgument reported to the hook.
func wantShardRefused(t *testing.T, rep reply, h *hook) {
	t.Helper()
	wantProblem(t, rep, http.StatusInternalServerError, "internal-error", "")
	errs := h.reported()
	if len(errs) != 1 || !errors.Is(errs[0], idem.ErrInvalidArgument) {
		t.Errorf("hook got %v, want one error matching idem.ErrInvalidArgument", errs)
	}
}

// TestHandlerShardFromMiddleware shows the shard value reaching the Store
// through Handler, on every database: a middleware in front of idemhttp's
// sets it from the request's X-Customer header, two customers' requests
// with one Idempotency-Key each run and place an order of their own, a
// retry of one replays its response, and a request that reaches idemhttp
// without a shard value is answered 500 internal-error, with
// ErrInvalidArgument reported to the error hook, the handler not run and
// nothing stored.
func TestHandlerShardFromMiddleware(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e, orders := tg.SetupByCustomer(t)
		var runs atomic.Int64
		place := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			customer, err := customerOf(r.Context())
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			if err := orders.Insert(r.Context(), idemhttp.Tx(r.Context()), customer, r.Header.Get("Idempotency-Key")); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			n := runs.Add(1)
			w.Header().Set("X-Run", fmt.Sprint(n))
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, "order %d of customer %d\n", n, customer)
		})
		var h hook
		srv := start(t, byCustomer(mustNew(t, e.Store, e.DB, idemhttp.WithSingleClient(), h.option()).Handler(place)))

		first := sendAs(t, srv, "7", "k1")
		wantRan(t, first, http.StatusCreated, 1)
		wantRan(t, sendAs(t, srv, "8", "k1"), http.StatusCreated, 2)
		again := sendAs(t, srv, "7", "k1")
		if again.status != first.status || string(again.body) != string(first.body) || !replayed(again) {
			t.Errorf("customer 7's retry: %v, want the replay of %v", again, first)
		}
		for _, c := range []int64{7, 8} {
			if n := orders.Count(t, c, "k1"); n != 1 {
				t.Errorf("customer %d has %d orders k1, want 1", c, n)
			}
			ctx := idem.WithShard(context.Background(), c)
			res, err := e.Store.Lookup(ctx, e.DB, idemhttp.StoredKey("", "k1"))
			if err != nil || res.Outcome != idem.Replay {
				t.Errorf("customer %d's record of k1: %v, %v; want a stored response", c, res.Outcome, err)
			}
		}

		wantShardRefused(t, sendAs(t, srv, "", "k2"), &h)
		if n := runs.Load(); n != 2 {
			t.Errorf("the handler ran %d times, want 2: it must not run without a shard value", n)
		}
		wantRows(t, e.DB, e.Table, 2)
		wantRows(t, e.DB, orders.Table, 2)
	})
}

// TestStepsShardFromMiddleware is TestHandlerShardFromMiddleware for the
// multi-step requests of Steps: the shard value that the middleware in
// front sets reaches Run, and the steps' context, so that two customers'
// requests with one key each run their steps, a retry replays, and a
// request without a shard value gets 500 internal-error with no step run
// and nothing stored.
func TestStepsShardFromMiddleware(t *testing.T) {
	forEachRunTarget(t, func(t *testing.T, tg target) {
		e, orders := tg.SetupByCustomer(t)
		var builds, finals atomic.Int64
		build := func(r *http.Request) ([]idem.Step, error) {
			builds.Add(1)
			key := r.Header.Get("Idempotency-Key")
			return []idem.Step{
				idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error {
					customer, err := customerOf(ctx)
					if err != nil {
						return err
					}
					return orders.Insert(ctx, tx, customer, key)
				}),
				idem.Final("answer", func(ctx context.Context, _ *sql.Tx) (idem.Response, error) {
					customer, err := customerOf(ctx)
					if err != nil {
						return idem.Response{}, err
					}
					n := finals.Add(1)
					return idem.Response{Status: http.StatusCreated, Body: fmt.Appendf(nil, "order %d of customer %d\n", n, customer)}, nil
				}),
			}, nil
		}
		var h hook
		m := mustNew(t, e.Store, e.DB, idemhttp.WithSingleClient(), h.option())
		srv := start(t, byCustomer(m.Steps(build)))

		first := sendAs(t, srv, "7", "k1")
		if first.status != http.StatusCreated || string(first.body) != "order 1 of customer 7\n" || replayed(first) {
			t.Fatalf("customer 7: %v, want 201 order 1 of customer 7", first)
		}
		if r := sendAs(t, srv, "8", "k1"); r.status != http.StatusCreated || string(r.body) != "order 2 of customer 8\n" || replayed(r) {
			t.Fatalf("customer 8 with 7's key: %v, want 201 order 2 of customer 8", r)
		}
		again := sendAs(t, srv, "7", "k1")
		if again.status != first.status || string(again.body) != string(first.body) || !replayed(again) {
			t.Errorf("customer 7's retry: %v, want the replay of %v", again, first)
		}
		for _, c := range []int64{7, 8} {
			if n := orders.Count(t, c, "k1"); n != 1 {
				t.Errorf("customer %d has %d orders k1, want 1", c, n)
			}
		}

		wantShardRefused(t, sendAs(t, srv, "", "k2"), &h)
		if n := finals.Load(); n != 2 {
			t.Errorf("the final step ran %d times, want 2", n)
		}
		wantRows(t, e.DB, e.Table, 2)
		wantRows(t, e.DB, orders.Table, 2)
	})
}
