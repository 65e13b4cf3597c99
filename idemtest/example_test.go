package idemtest_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/idemtest"
)

// orders is a small handler of the kind a service writes: it places an order
// under the request's Idempotency-Key, in one transaction with the key.
type orders struct {
	db    *sql.DB
	store *idem.Store
}

func (o *orders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	hash := idem.Fingerprint([]byte(r.Method), []byte(r.URL.Path), body)
	res, err := o.store.DoTx(r.Context(), o.db, nil, key, hash, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (item) VALUES ($1)", string(body)); err != nil {
			return idem.Response{}, err
		}
		return idem.Response{Status: http.StatusCreated, Body: []byte(`{"order":1}`)}, nil
	})
	switch {
	case err != nil:
		http.Error(w, "try again", http.StatusServiceUnavailable)
	case res.Outcome == idem.Mismatch:
		http.Error(w, "key reused for another request", http.StatusUnprocessableEntity)
	case res.Outcome == idem.InFlight:
		http.Error(w, "request in progress", http.StatusConflict)
	default: // Claimed or Replay
		w.WriteHeader(res.Response.Status)
		w.Write(res.Response.Body)
	}
}

// Example tests the handler above for all four outcomes with go-sqlmock
// alone, without knowing idem's SQL.
func Example() {
	db, mock, err := sqlmock.New()
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := idem.New(idem.Postgres())
	if err != nil {
		log.Fatal(err)
	}
	handler := &orders{db: db, store: store}
	m := idemtest.NewMock(mock, store)
	hash := idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte("book"))
	placed := idem.Response{Status: http.StatusCreated, Body: []byte(`{"order":1}`)}

	for _, c := range []struct {
		name   string
		expect func()
	}{
		{"claimed", func() {
			mock.ExpectBegin()
			m.ExpectDo("order-1", hash)
			mock.ExpectExec(regexp.QuoteMeta("INSERT INTO orders (item) VALUES ($1)")).
				WithArgs("book").WillReturnResult(sqlmock.NewResult(1, 1))
			m.ExpectComplete("order-1", hash, placed)
			mock.ExpectCommit()
		}},
		{"replay", func() {
			mock.ExpectBegin()
			m.ExpectDo("order-1", hash).WillReplay(placed)
			mock.ExpectRollback()
		}},
		{"mismatch", func() {
			mock.ExpectBegin()
			m.ExpectDo("order-1", hash).WillMismatch()
			mock.ExpectRollback()
		}},
		{"in flight", func() {
			mock.ExpectBegin()
			m.ExpectDo("order-1", hash).WillBeInFlight()
			mock.ExpectRollback()
		}},
	} {
		c.expect()
		req := httptest.NewRequest("POST", "/orders", strings.NewReader("book"))
		req.Header.Set("Idempotency-Key", "order-1")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Printf("%-9s %d %s\n", c.name, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// claimed   201 {"order":1}
	// replay    201 {"order":1}
	// mismatch  422 key reused for another request
	// in flight 409 request in progress
}

// ExampleMock_ExpectRequest tests a handler behind the idemhttp middleware
// without a database: the middleware's claim, the handler's own statement
// and the middleware's completion are one expectation each, and the test
// never names idem's SQL, the stored key or the request hash.
func ExampleMock_ExpectRequest() {
	db, mock, err := sqlmock.New()
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := idem.New(idem.Postgres())
	if err != nil {
		log.Fatal(err)
	}
	mw, err := idemhttp.New(store, db, nil, idemhttp.WithSingleClient())
	if err != nil {
		log.Fatal(err)
	}
	m := idemtest.NewMock(mock, store)

	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		item, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		if _, err := idemhttp.Tx(r.Context()).ExecContext(r.Context(), "INSERT INTO orders (item) VALUES ($1)", string(item)); err != nil {
			http.Error(w, "database error", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"order":1}`)
	})
	order := func() *http.Request {
		req := httptest.NewRequest("POST", "/orders", strings.NewReader("book"))
		req.Header.Set("Idempotency-Key", "order-1")
		return req
	}
	serve := func(req *http.Request) {
		rec := httptest.NewRecorder()
		mw.Handler(createOrder).ServeHTTP(rec, req)
		fmt.Printf("%d replayed=%q %s\n", rec.Code, rec.Header().Get(idemhttp.ReplayedHeader), rec.Body)
	}

	// The first request claims its key, places the order, and stores its
	// response, all in one transaction.
	req := order()
	mock.ExpectBegin()
	claim, err := m.ExpectRequest(mw, req)
	if err != nil {
		log.Fatal(err)
	}
	mock.ExpectExec(regexp.QuoteMeta("INSERT INTO orders (item) VALUES ($1)")).
		WithArgs("book").WillReturnResult(sqlmock.NewResult(1, 1))
	m.ExpectCompleteAny(claim.Key())
	mock.ExpectCommit()
	serve(req)

	// Its retry finds the stored response, and the handler does not run.
	req = order()
	mock.ExpectBegin()
	claim, err = m.ExpectRequest(mw, req)
	if err != nil {
		log.Fatal(err)
	}
	claim.WillReplay(idem.Response{Status: http.StatusCreated, Body: []byte(`{"order":1}`)})
	mock.ExpectRollback()
	serve(req)

	if err := mock.ExpectationsWereMet(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 201 replayed="" {"order":1}
	// 201 replayed="true" {"order":1}
}
